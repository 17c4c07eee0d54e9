//! A private `redis-server`: one process on a free loopback port, with saving off, working in a
//! temporary directory of its own.
//!
//! Every test starts its own server, so tests run in parallel and may kill, freeze and restart
//! theirs. A missing `redis-server` fails with how to install it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tls::ServerTls;
use crate::{BoxError, TempDir};

/// A `redis-server` child process, killed (SIGKILL) and its directory removed when dropped.
///
/// It runs with `--save "" --appendonly no` in a fresh directory: no snapshot is written where
/// the tests run, and whatever it does write (a replica's first sync, a cluster node's
/// `nodes.conf`, an explicit `SAVE`) goes with it.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    binary: PathBuf,
    /// Arguments beyond the port, the directory and the no-persistence defaults (a cluster
    /// node's, a replica's).
    extra: Vec<String>,
    /// The `--requirepass` of `extra`, which [`cli`](Self::cli) gives.
    password: Option<String>,
    /// TLS only, on `port`: clients (and [`cli`](Self::cli)) speak TLS.
    tls: Option<ServerTls>,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers; fails the test if it cannot.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`start`](Self::start) with `extra` arguments (`--replicaof host port`...). With
    /// `--requirepass PASSWORD` among them, [`cli`](Self::cli) authenticates with it.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::try_start_on(extra, free_port).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Starts a server on a free port and waits until it answers, or says why it could not.
    pub fn try_start() -> Result<Self, BoxError> {
        Self::try_start_on(&[], free_port)
    }

    /// [`start_with`](Self::start_with), speaking TLS alone (`--port 0 --tls-port`) as `tls`
    /// says: its [`url`](Self::url) is `rediss://`.
    pub fn start_tls(tls: &ServerTls, extra: &[&str]) -> Self {
        Self::try_start_tls_on(extra, free_port, Some(tls.clone()))
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Starts a server with `extra` arguments on a port from `port`, trying 20 ports in turn.
    pub(crate) fn try_start_on(extra: &[&str], port: fn() -> u16) -> Result<Self, BoxError> {
        Self::try_start_tls_on(extra, port, None)
    }

    /// [`try_start_on`](Self::try_start_on), over TLS alone when `tls` is given.
    pub(crate) fn try_start_tls_on(
        extra: &[&str],
        port: fn() -> u16,
        tls: Option<ServerTls>,
    ) -> Result<Self, BoxError> {
        let binary = find_binary("redis-server")?;
        let dir = TempDir::new("redis")
            .map_err(|err| format!("cannot create a directory for redis-server: {err}"))?;
        let mut server = RedisServer {
            child: None,
            port: 0,
            binary,
            extra: extra.iter().map(|&arg| arg.to_owned()).collect(),
            password: extra
                .windows(2)
                .find(|pair| pair[0] == "--requirepass")
                .map(|pair| pair[1].to_owned()),
            tls,
            dir,
        };
        for _ in 0..20 {
            server.port = port();
            // A port the OS just handed out may be taken by another process before the server
            // binds it: the server then exits, and the next port is tried.
            if server.spawn()? {
                return Ok(server);
            }
        }
        Err("could not start redis-server on a free port after 20 attempts".into())
    }

    /// `redis://127.0.0.1:<port>`, or `rediss://` for a TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// How it speaks TLS, if it does.
    pub fn tls(&self) -> Option<&ServerTls> {
        self.tls.as_ref()
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory it works in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether the process runs (it is not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server at once (SIGKILL): connections drop, state is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, in the same directory (empty, as after a crash;
    /// a cluster node finds its `nodes.conf` again).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn().unwrap_or_else(|err| panic!("{err}")) {
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes the process (SIGSTOP): TCP stays open, nothing answers.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Thaws a frozen process (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Runs `redis-cli` against this server and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.port, self.password.as_deref(), self.tls.as_ref(), args)
    }

    /// Every key in the server.
    pub fn keys(&self) -> Vec<String> {
        let out = self.cli(&["--scan"]);
        out.lines()
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// `PTTL key` in milliseconds: -1 when the key has no TTL, -2 when it does not exist.
    pub fn pttl(&self, key: &str) -> i64 {
        let out = self.cli(&["PTTL", key]);
        out.parse()
            .unwrap_or_else(|_| panic!("PTTL {key} answered {out:?}"))
    }

    /// `ZCARD key`: the permits (live or expired, not yet dropped) of a concurrency slot.
    pub fn zcard(&self, key: &str) -> u64 {
        let out = self.cli(&["ZCARD", key]);
        out.parse()
            .unwrap_or_else(|_| panic!("ZCARD {key} answered {out:?}"))
    }

    /// A numeric field of `INFO <section>` (`rdb_changes_since_last_save`, `blocked_clients`...).
    pub fn info(&self, section: &str, field: &str) -> u64 {
        let info = self.cli(&["INFO", section]);
        info.lines()
            .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
    }

    /// How many calls of scripts and functions (`FCALL`, `EVALSHA`) the server has run (0
    /// before the first): the limiter's round trips.
    pub fn script_calls(&self) -> u64 {
        self.command_calls()
            .iter()
            .filter(|(name, _)| crate::commands::is_script_call(name))
            .map(|(_, calls)| calls)
            .sum()
    }

    /// How many times the server has run each command (`INFO commandstats`), by the name it
    /// gives (`fcall`, `function|load`, ...).
    pub fn command_calls(&self) -> std::collections::HashMap<String, u64> {
        let info = self.cli(&["INFO", "commandstats"]);
        crate::commands::parse_command_calls(&info).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("server running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    /// Starts the process and waits until it answers PING: false if it exited (its port was
    /// taken) or stayed silent for 5 s.
    fn spawn(&mut self) -> Result<bool, BoxError> {
        let port = match &self.tls {
            Some(tls) => tls.server_args(self.port),
            None => vec!["--port".to_owned(), self.port.to_string()],
        };
        let child = Command::new(&self.binary)
            .args(port)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--protected-mode", "no", "--loglevel", "warning"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| format!("cannot run {}: {err}", self.binary.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Ok(false);
            }
            if answers_ping(self.port, self.tls.as_ref()) {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Ok(false)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL also ends a frozen (SIGSTOPped) server. The directory goes after the process.
        self.kill();
    }
}

/// Whether a Redis server on `port` answers `PING` (spoken directly: starting needs no
/// `redis-cli`, except over TLS). A server with a password answers `-NOAUTH`: it is up too.
pub(crate) fn answers_ping(port: u16, tls: Option<&ServerTls>) -> bool {
    if tls.is_some() {
        let answer = cli(port, None, tls, &["PING"]);
        return answer == "PONG" || answer.starts_with("NOAUTH");
    }
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && (&reply == b"+PONG\r\n" || &reply == b"-NOAUTH")
}

/// Runs `redis-cli -p <port> <args>`, authenticated with `password` when given, over TLS with
/// the client certificate for a TLS server, and returns its output, trimmed.
pub(crate) fn cli(
    port: u16,
    password: Option<&str>,
    tls: Option<&ServerTls>,
    args: &[&str],
) -> String {
    let binary = find_binary("redis-cli").unwrap_or_else(|err| panic!("{err}"));
    let mut command = Command::new(binary);
    // The environment rather than `-a`: no warning on stderr, no password in `ps`.
    if let Some(password) = password {
        command.env("REDISCLI_AUTH", password);
    }
    if let Some(tls) = tls {
        command.args(tls.cli_args());
    }
    let output = command
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A loopback port the OS just handed out and released: free unless another process takes it in
/// the next milliseconds.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// Finds a binary on PATH, or says how to install Redis.
pub fn find_binary(name: &str) -> Result<PathBuf, BoxError> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.ok_or_else(|| {
        format!(
            "`{name}` was not found on PATH. The tests and benchmarks start their own Redis 7: \
             install it (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install \
             redis`) and run again."
        )
        .into()
    })
}
