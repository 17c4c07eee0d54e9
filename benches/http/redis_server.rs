//! A private `redis-server` for one benchmark run, and the counters read from it.
//!
//! Shared by `benches/http` and `examples/scaling.rs` (which includes this file with `#[path]`),
//! so that both start Redis and count its commands the same way.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Errors of a benchmark run: each says what failed in words a user can act on.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `redis-server` child process on a free loopback port, with no persistence (the data lives as
/// long as the run), killed when dropped.
pub(crate) struct RedisServer {
    child: Child,
    url: String,
}

impl RedisServer {
    /// Starts the server and waits until it accepts connections.
    pub(crate) fn start() -> Result<Self, BoxError> {
        let binary = find_on_path("redis-server").ok_or(
            "`redis-server` was not found on PATH. The benchmark starts its own Redis: install \
             Redis 7 (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install \
             redis`) and run again.",
        )?;
        // A port the OS just handed out and released: free unless another process takes it in
        // the next milliseconds, in which case the wait below reports it.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| format!("could not start {}: {err}", binary.display()))?;
        let mut server = Self {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait()? {
                return Err(
                    format!("redis-server on port {port} exited at start: {status}").into(),
                );
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("redis-server on port {port} did not start in 10 s").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // On an error above, dropping `server` kills the child.
        Ok(server)
    }

    /// `redis://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Already gone is fine: there is nothing left to stop.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A connection of the benchmark's own, for reading counters: separate from the ones under test.
pub(crate) async fn connect(url: &str) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    let client = redis::Client::open(url)?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|err| format!("could not connect to {url}: {err}").into())
}

/// How many times Redis has run each command since it started, from `INFO commandstats`
/// (`cmdstat_evalsha:calls=12,...` becomes `"evalsha" => 12`).
pub(crate) async fn command_calls(
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<HashMap<String, u64>, BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await?;
    let mut calls = HashMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let count = fields
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
            .and_then(|count| count.parse().ok())
            .ok_or_else(|| format!("unexpected INFO commandstats line: {line}"))?;
        calls.insert(name.to_owned(), count);
    }
    Ok(calls)
}

/// The commands Redis ran between two readings of [`command_calls`]: `EVALSHA`s, and all others
/// except the `INFO` the readings themselves send.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Calls {
    pub(crate) evalsha: u64,
    pub(crate) other: u64,
}

impl Calls {
    pub(crate) fn between(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> Self {
        let mut calls = Self::default();
        for (name, &count) in after {
            let delta = count.saturating_sub(before.get(name).copied().unwrap_or(0));
            match name.as_str() {
                "evalsha" => calls.evalsha += delta,
                "info" => {}
                _ => calls.other += delta,
            }
        }
        calls
    }

    pub(crate) fn add(&mut self, other: Self) {
        self.evalsha += other.evalsha;
        self.other += other.other;
    }
}
