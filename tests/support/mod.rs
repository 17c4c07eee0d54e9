//! Shared by the integration tests: private Redis servers and small HTTP helpers.
//!
//! Every test starts its own `redis-server` on a free port, so tests run in parallel and may kill,
//! freeze and restart their server. A missing `redis-server` fails the test with instructions.

#[cfg(feature = "cluster")]
pub(crate) mod cluster;
pub(crate) mod logs;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, Response};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// A `redis-server` child process owned by one test.
pub(crate) struct RedisServer {
    child: Option<Child>,
    port: u16,
    binary: PathBuf,
    /// Arguments beyond the port and the no-persistence defaults (a cluster node's, a replica's).
    extra: Vec<String>,
    /// The working directory (where a cluster node keeps its nodes.conf), if not the test's.
    dir: Option<PathBuf>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers.
    pub(crate) fn start() -> Self {
        Self::start_with(Vec::new(), None, free_port)
    }

    /// Starts a server with `extra` arguments in `dir`, on a port from `port`, and waits until it
    /// answers.
    fn start_with(extra: Vec<String>, dir: Option<PathBuf>, port: fn() -> u16) -> Self {
        let binary = find_binary("redis-server");
        for _ in 0..20 {
            let mut server = RedisServer {
                child: None,
                port: port(),
                binary: binary.clone(),
                extra: extra.clone(),
                dir: dir.clone(),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server on a free port after 20 attempts");
    }

    /// `redis://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server at once (SIGKILL): connections drop, state is lost.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (empty, as after a crash).
    pub(crate) fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes the process (SIGSTOP): TCP stays open, nothing answers.
    pub(crate) fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Thaws a frozen process (SIGCONT).
    pub(crate) fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Runs `redis-cli` against this server and returns its output.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        let output = Command::new(find_binary("redis-cli"))
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Every key in the server.
    pub(crate) fn keys(&self) -> Vec<String> {
        let out = self.cli(&["--scan"]);
        out.lines()
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("server running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new(&self.binary)
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--protected-mode", "no", "--loglevel", "warning"])
            .args(&self.extra)
            .current_dir(self.dir.as_deref().unwrap_or(std::path::Path::new(".")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                // Exited: most likely the port was taken meanwhile.
                self.child = None;
                return false;
            }
            if self.cli(&["ping"]) == "PONG" {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL also ends a frozen (SIGSTOPped) server.
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Finds a binary on PATH, or fails the test saying how to install it.
pub(crate) fn find_binary(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` was not found on PATH. These tests run against a real Redis 7: install it \
             (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install redis`) and run again."
        )
    })
}

/// Sends a GET through `app` as if from `peer`, with the given headers.
pub(crate) async fn get<S>(
    app: &S,
    uri: &str,
    peer: &str,
    headers: &[(&str, &str)],
) -> Response<Body>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = std::convert::Infallible>
        + Clone,
{
    let mut builder = Request::get(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(Body::empty()).expect("valid request");
    let peer: SocketAddr = peer.parse().expect("peer is ip:port");
    request.extensions_mut().insert(ConnectInfo(peer));
    app.clone().oneshot(request).await.expect("infallible")
}

/// A header's value as text ("" when absent).
pub(crate) fn header<B>(response: &Response<B>, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().expect("ascii").to_owned())
        .unwrap_or_default()
}

/// The response body as text.
pub(crate) async fn text(response: Response<Body>) -> String {
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf-8 body")
}

// ---- Added for the Redis failure-mode and storage tests (append-only). ----

impl RedisServer {
    /// `PTTL key` in milliseconds: -1 when the key has no TTL, -2 when it does not exist.
    pub(crate) fn pttl(&self, key: &str) -> i64 {
        let out = self.cli(&["PTTL", key]);
        out.parse()
            .unwrap_or_else(|_| panic!("PTTL {key} answered {out:?}"))
    }
}

/// Sends a GET like [`get`] and also returns how long the answer took.
pub(crate) async fn timed_get<S>(
    app: &S,
    uri: &str,
    peer: &str,
    headers: &[(&str, &str)],
) -> (Response<Body>, Duration)
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = std::convert::Infallible>
        + Clone,
{
    let started = Instant::now();
    let response = get(app, uri, peer, headers).await;
    (response, started.elapsed())
}

// ---- Added for the concurrency tests (append-only). ----

impl RedisServer {
    /// `ZCARD key`: the permits (live or expired, not yet dropped) of a concurrency slot.
    pub(crate) fn zcard(&self, key: &str) -> u64 {
        let out = self.cli(&["ZCARD", key]);
        out.parse()
            .unwrap_or_else(|_| panic!("ZCARD {key} answered {out:?}"))
    }
}

/// Polls `condition` every 10 ms until it holds, failing the test after `within` (a bound far
/// above what a correct implementation needs, to catch a condition that never comes true).
pub(crate) async fn eventually<F, Fut>(within: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still not true after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- Added when the integration tests became one binary (append-only). ----

impl RedisServer {
    /// A numeric field of `INFO <section>` (`rdb_changes_since_last_save`, `blocked_clients`...).
    pub(crate) fn info(&self, section: &str, field: &str) -> u64 {
        let info = self.cli(&["INFO", section]);
        info.lines()
            .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
    }

    /// How many `EVALSHA` calls the server has run (`calls=N` of `cmdstat_evalsha`; 0 before
    /// the first).
    pub(crate) fn evalsha_calls(&self) -> u64 {
        self.cli(&["INFO", "commandstats"])
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0)
    }
}

/// The request cost a test sends in an `x-cost` header: its value, or 1 without one.
pub(crate) fn cost(parts: &http::request::Parts) -> u32 {
    parts
        .headers
        .get("x-cost")
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}
