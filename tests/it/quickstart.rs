//! The quickstart contract (issue 2, point 8), as a new user meets it: the compiled example run as
//! a process, with the memory store and with Redis, spoken to over TCP with plain HTTP/1.1.
//!
//! `cargo test` builds the examples before it runs the integration tests. A filtered run
//! (`cargo test --test it quickstart`) does not: build them first with `cargo build --examples`.
//!
//! Waits are generous and polled (a loaded machine may be slow to start a process or connect to
//! Redis); the limits themselves are checked exactly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, example_binary, success_output};

/// How long the example may take to print its first line, and to exit after SIGTERM.
const PATIENCE: Duration = Duration::from_secs(60);

/// The headers the rate limiter writes; `GET /` must carry none of them.
const RATE_LIMIT_HEADERS: [&str; 4] =
    ["rate-limiting-", "ratelimit", "x-ratelimit-", "retry-after"];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// A running `quickstart` process, killed when dropped.
struct Quickstart {
    child: Child,
    /// `127.0.0.1:<port>`, from `BIND`.
    addr: String,
    first_line: String,
    stderr: Arc<Mutex<String>>,
}

impl Quickstart {
    /// Starts the example with `BIND` on a free port and the given environment (nothing else of
    /// the contract's environment is inherited), and waits for its first line.
    fn start(env: &[(&str, &str)]) -> Self {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(example_binary("quickstart"));
        command
            .env_remove("REDIS_URL")
            .env_remove("REDIS_CLUSTER_URLS")
            .env_remove("REDIS_SENTINEL_URLS")
            .env_remove("REDIS_SENTINEL_MASTER")
            .env_remove("RATE_LIMIT_FAILURE")
            .env("BIND", &addr)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the quickstart example starts");

        // Read both pipes to the end on their own threads, so the example never blocks on a full
        // pipe; the first stdout line comes back through a channel.
        let (first_line, received) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        std::thread::spawn(move || {
            let mut lines = stdout.lines();
            let line = lines.next().and_then(Result::ok).unwrap_or_default();
            let _ = first_line.send(line);
            lines.for_each(drop);
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped stderr");
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut buffer = [0; 4096];
            while let Ok(read @ 1..) = pipe.read(&mut buffer) {
                let text = String::from_utf8_lossy(&buffer[..read]);
                collected.lock().unwrap().push_str(&text);
            }
        });

        let mut quickstart = Quickstart {
            child,
            addr,
            first_line: String::new(),
            stderr,
        };
        quickstart.first_line = received.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            panic!(
                "the quickstart printed no line within {PATIENCE:?}; stderr:\n{}",
                quickstart.stderr()
            )
        });
        quickstart
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        http_get(&self.addr, path, headers)
    }

    /// Sends SIGTERM and waits for the process to exit.
    fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {pid} failed");
        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .try_wait()
                .expect("the process can be waited for")
            {
                return status;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "the quickstart did not exit within {PATIENCE:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Quickstart {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("quickstart stderr:\n{}", self.stderr());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response: status, headers (names in lower case, in order), body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    /// The value of a single-valued header, or "" when it is absent.
    fn header(&self, name: &str) -> &str {
        let mut values = self.all(name).into_iter();
        let value = values.next().unwrap_or_default();
        assert!(
            values.next().is_none(),
            "{name} appears more than once: {self:#?}"
        );
        value
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(header, _)| header == name)
            .map(|(_, value)| value.as_str())
            .collect()
    }

    /// The rate-limit headers present (by name).
    fn rate_limit_headers(&self) -> Vec<&str> {
        self.headers
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| {
                RATE_LIMIT_HEADERS
                    .iter()
                    .any(|prefix| name.starts_with(prefix))
            })
            .collect()
    }
}

/// One GET over a fresh connection (`Connection: close`), read to the end.
fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|err| panic!("connect {addr}: {err}"));
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    parse(&raw).unwrap_or_else(|| panic!("GET {path}: not an HTTP/1.1 response: {raw:?}"))
}

fn parse(raw: &[u8]) -> Option<Reply> {
    let text = std::str::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()?
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        })
        .collect::<Option<_>>()?;
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// The body of a chunked transfer coding: `<hex size>\r\n<data>\r\n`, up to a size of 0.
fn dechunk(mut chunks: &str) -> Option<String> {
    let mut body = String::new();
    loop {
        let (size, rest) = chunks.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.push_str(rest.get(..size)?);
        chunks = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// `Retry-After` in whole seconds, between 1 and `at_most`.
fn assert_retry_after(reply: &Reply, at_most: u64) {
    let seconds: u64 = reply
        .header("retry-after")
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After is not whole seconds: {reply:#?}"));
    assert!((1..=at_most).contains(&seconds), "{reply:#?}");
}

/// The headers every response of a limited route carries when the store decided: the
/// `Rate-Limiting-*` headers (`used` requests counted), `RateLimit-Policy` and `RateLimit`.
fn assert_decided(reply: &Reply, state: &str, used: u64, policy: &str, remaining: u64) {
    assert_eq!(reply.header("rate-limiting-state"), state, "{reply:#?}");
    assert_eq!(
        reply.header("rate-limiting-total-requests"),
        used.to_string(),
        "{reply:#?}"
    );
    let expires_at = reply.header("rate-limiting-expires-at");
    assert!(
        humantime::parse_rfc3339(expires_at).is_ok(),
        "Rate-Limiting-Expires-At is not RFC 3339: {reply:#?}"
    );
    assert_eq!(reply.header("ratelimit-policy"), policy, "{reply:#?}");
    let name = policy.split(';').next().unwrap();
    let ratelimit = reply.header("ratelimit");
    let prefix = format!("{name};r={remaining};t=");
    assert!(ratelimit.starts_with(&prefix), "{reply:#?}");
}

/// `GET /`, `/api/hello` and `/api/key` behave as the contract says. `api_key` is fresh.
fn assert_contract(quickstart: &Quickstart, api_key: &str) {
    const HELLO: &str = r#""hello";q=5;w=10"#;
    const KEY: &str = r#""key";q=3;w=10"#;

    // `GET /` is not limited: more requests than any quota, no rate-limit header.
    for _ in 0..7 {
        let reply = quickstart.get("/", &[]);
        assert_eq!(reply.status, 200, "{reply:#?}");
        assert!(reply.rate_limit_headers().is_empty(), "{reply:#?}");
    }

    // `/api/hello`: 5 per 10 s per client address, then 429 with `Retry-After`.
    for used in 1..=5 {
        let reply = quickstart.get("/api/hello", &[]);
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, "hello"),
            "{reply:#?}"
        );
        assert_decided(&reply, "Allow", used, HELLO, 5 - used);
        assert_eq!(reply.header("retry-after"), "", "{reply:#?}");
    }
    let refused = quickstart.get("/api/hello", &[]);
    assert_eq!(refused.status, 429, "{refused:#?}");
    assert_decided(&refused, "Deny", 5, HELLO, 0);
    assert_retry_after(&refused, 10);
    assert_eq!(refused.header("content-type"), "application/problem+json");

    // `/api/key`: 3 back to back per `x-api-key` (GCRA, burst 3), the fourth refused.
    let key = [("x-api-key", api_key)];
    for used in 1..=3 {
        let reply = quickstart.get("/api/key", &key);
        assert_eq!(reply.status, 200, "request {used}: {reply:#?}");
        assert_decided(&reply, "Allow", used, KEY, 3 - used);
    }
    let refused = quickstart.get("/api/key", &key);
    assert_eq!(refused.status, 429, "{refused:#?}");
    assert_decided(&refused, "Deny", 3, KEY, 0);
    // One request drains every 10/3 s: the wait is at most 4 s.
    assert_retry_after(&refused, 4);

    // Without the header: 400, saying so, with the route's policy and no decision.
    let unkeyed = quickstart.get("/api/key", &[]);
    assert_eq!(unkeyed.status, 400, "{unkeyed:#?}");
    assert_eq!(unkeyed.header("content-type"), "application/problem+json");
    assert!(unkeyed.body.contains("x-api-key"), "{unkeyed:#?}");
    assert_eq!(
        unkeyed.rate_limit_headers(),
        ["ratelimit-policy"],
        "{unkeyed:#?}"
    );
    assert_eq!(unkeyed.header("ratelimit-policy"), KEY);
}

/// Sends requests with fresh API keys until one is counted by Redis (`Allow`, not `Skipped`):
/// the first decisions connect, which may take longer than the example's 100 ms deadline on a
/// loaded machine.
fn wait_until_redis_decides(quickstart: &Quickstart) {
    let started = Instant::now();
    for attempt in 0.. {
        let reply = quickstart.get("/api/key", &[("x-api-key", &format!("warm-up-{attempt}"))]);
        if reply.header("rate-limiting-state") == "Allow" {
            return;
        }
        assert_eq!(reply.header("rate-limiting-state"), "Skipped", "{reply:#?}");
        assert!(
            started.elapsed() < PATIENCE,
            "the quickstart did not reach Redis within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_exits_cleanly_on_sigterm(mut quickstart: Quickstart) {
    let status = quickstart.terminate();
    assert!(status.success(), "exit status after SIGTERM: {status}");
}

#[test]
fn with_the_memory_store() {
    let quickstart = Quickstart::start(&[]);
    assert_eq!(
        quickstart.first_line,
        format!(
            "quickstart: MemoryStore, serving on http://{}",
            quickstart.addr
        )
    );
    assert_contract(&quickstart, "memory");
    assert_exits_cleanly_on_sigterm(quickstart);
}

#[test]
fn with_redis_failing_open_by_default() {
    let mut redis = RedisServer::start();
    // With credentials: the test server has no password set, so its `default` user accepts any.
    let url = format!("redis://default:s3cret-pw@127.0.0.1:{}", redis.port());
    let quickstart = Quickstart::start(&[("REDIS_URL", &url)]);
    // The first line names the store and the address, but never the password.
    assert_eq!(
        quickstart.first_line,
        format!(
            "quickstart: RedisStore at redis://default:***@127.0.0.1:{}, serving on http://{}",
            redis.port(),
            quickstart.addr
        )
    );
    wait_until_redis_decides(&quickstart);
    assert_contract(&quickstart, "redis");
    // The counts live in Redis (a denied request writes nothing).
    assert_eq!(
        redis.cli(&["HGET", "ratelimit:hello:fw-10s:{127.0.0.1}", "n"]),
        "5"
    );

    // Redis dies. The client Redis denied a moment ago stays denied until its window ends:
    // the store remembers the denial and answers it without Redis.
    redis.kill();
    let refused = quickstart.get("/api/hello", &[]);
    assert_eq!(refused.status, 429, "{refused:#?}");
    assert_eq!(
        refused.header("rate-limiting-state"),
        "Deny",
        "{refused:#?}"
    );
    // Every other request passes, marked `Skipped`, with the policy and no decision.
    for _ in 0..3 {
        let reply = quickstart.get("/api/key", &[("x-api-key", "during-the-outage")]);
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, "key accepted"),
            "{reply:#?}"
        );
        assert_eq!(reply.header("rate-limiting-state"), "Skipped", "{reply:#?}");
        assert_eq!(reply.header("ratelimit-policy"), r#""key";q=3;w=10"#);
        assert_eq!(reply.header("ratelimit"), "", "{reply:#?}");
    }
    assert_exits_cleanly_on_sigterm(quickstart);
}

#[test]
fn with_redis_failing_closed_when_asked() {
    let mut redis = RedisServer::start();
    let quickstart = Quickstart::start(&[
        ("REDIS_URL", &redis.url()),
        ("RATE_LIMIT_FAILURE", "closed"),
    ]);
    wait_until_redis_decides(&quickstart);

    // Redis dies: requests are refused with 503 and `Retry-After`, with the policy.
    redis.kill();
    for (path, key, policy) in [
        ("/api/hello", None, r#""hello";q=5;w=10"#),
        ("/api/key", Some("k1"), r#""key";q=3;w=10"#),
    ] {
        let headers: Vec<_> = key.map(|key| ("x-api-key", key)).into_iter().collect();
        let reply = quickstart.get(path, &headers);
        assert_eq!(reply.status, 503, "{path}: {reply:#?}");
        assert_retry_after(&reply, 1);
        assert_eq!(reply.header("ratelimit-policy"), policy, "{path}");
        assert_eq!(reply.header("content-type"), "application/problem+json");
    }
    assert_exits_cleanly_on_sigterm(quickstart);
}

#[cfg(feature = "cluster")]
#[test]
fn on_a_redis_cluster() {
    let cluster = crate::support::cluster::RedisCluster::start();
    let quickstart = Quickstart::start(&[("REDIS_CLUSTER_URLS", &cluster.urls_joined())]);
    // The first line says the limits live in a cluster, and names its nodes.
    assert_eq!(
        quickstart.first_line,
        format!(
            "quickstart: RedisStore on Redis Cluster {}, serving on http://{}",
            cluster.urls_joined(),
            quickstart.addr
        )
    );
    wait_until_redis_decides(&quickstart);
    assert_contract(&quickstart, "cluster");
    // The client's counts live on the primary of its slot.
    let primary = cluster.primary_for("{127.0.0.1}");
    assert_eq!(
        cluster
            .node(primary)
            .cli(&["HGET", "ratelimit:hello:fw-10s:{127.0.0.1}", "n"]),
        "5"
    );
    assert_exits_cleanly_on_sigterm(quickstart);
}

#[cfg(feature = "sentinel")]
#[test]
fn on_redis_sentinel() {
    use crate::support::sentinel::{MASTER, RedisSentinels};

    let mut sentinels = RedisSentinels::start();
    let quickstart = Quickstart::start(&[
        ("REDIS_SENTINEL_URLS", &sentinels.sentinel_urls()),
        ("REDIS_SENTINEL_MASTER", MASTER),
    ]);
    assert_eq!(
        quickstart.first_line,
        format!(
            "quickstart: RedisStore on Redis Sentinel {} (primary {MASTER}), serving on http://{}",
            sentinels.sentinel_urls(),
            quickstart.addr
        )
    );
    wait_until_redis_decides(&quickstart);
    assert_contract(&quickstart, "sentinel");
    assert_eq!(
        sentinels
            .primary()
            .cli(&["HGET", "ratelimit:hello:fw-10s:{127.0.0.1}", "n"]),
        "5"
    );
    assert_exits_cleanly_on_sigterm(quickstart);
}

/// `examples/client.rs` against the quickstart: a client that waits as the headers say is never
/// refused twice in a row (nor, here, at all: it waits for the window before the sixth request).
#[test]
fn a_client_doing_what_the_headers_say_is_never_refused_twice_in_a_row() {
    let quickstart = Quickstart::start(&[]);
    let stdout = success_output(
        Command::new(example_binary("client"))
            .arg(format!("http://{}/api/hello", quickstart.addr))
            .arg("7")
            .env("CLIENT_MAX_WAIT_SECS", "15"),
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{stdout}");
    // Five admitted, the fifth saying nothing is left and when more is: the client waits that
    // long, and the next two are admitted.
    for line in &lines[..4] {
        assert!(line.contains(": 200 state=Allow"), "{stdout}");
    }
    assert!(
        lines[4].contains(": 200 state=Allow remaining=0"),
        "{stdout}"
    );
    assert!(!lines[4].ends_with("wait none"), "{stdout}");
    for line in &lines[5..7] {
        assert!(line.contains(": 200 state=Allow"), "{stdout}");
    }
    assert_eq!(
        lines[7],
        "7 requests, 0 refused (429), refused twice in a row: 0"
    );
}
