//! The upstream, the proxy process, and a client whose requests cannot hang a test.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::WebSocketUpgrade;
use axum::extract::ws::Message;
use axum::http::HeaderMap;
use axum::routing::{any, get, post};
use futures_util::StreamExt;

pub(crate) use crate::process::{BINARY, free_addr};
use crate::process::{GatewayProcess, Output};

/// The upstream: echoes forwarding headers and the request id, streams, counts uploads, fails, echoes WebSockets.
pub(crate) async fn upstream() -> SocketAddr {
    let app = Router::new()
        .route(
            "/api/echo",
            get(|headers: HeaderMap| async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-")
                        .to_owned()
                };
                format!(
                    "{}|{}|{}|{}|{}",
                    header("x-forwarded-for"),
                    header("forwarded"),
                    header("x-forwarded-proto"),
                    header("x-forwarded-host"),
                    header("x-request-id"),
                )
            }),
        )
        .route(
            "/open/stream",
            get(|| async {
                let chunks = futures_util::stream::unfold(0, |step| async move {
                    match step {
                        0 => Some((Ok::<_, std::io::Error>(Bytes::from("first;")), 1)),
                        1 => {
                            tokio::time::sleep(Duration::from_millis(500)).await;
                            Some((Ok(Bytes::from("last")), 2))
                        }
                        _ => None,
                    }
                });
                Body::from_stream(chunks)
            }),
        )
        .route(
            "/open/upload",
            // Counted frame by frame: nothing is buffered here either.
            post(|body: Body| async move {
                let mut stream = body.into_data_stream();
                let mut length = 0;
                while let Some(chunk) = stream.next().await {
                    length += chunk.expect("the upload's frames").len();
                }
                length.to_string()
            }),
        )
        .route("/open/hang", get(std::future::pending::<&'static str>))
        .route(
            "/open/fail",
            get(|| async {
                (
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    [("x-upstream", "yes")],
                    "upstream broke",
                )
            }),
        )
        .route(
            "/ws",
            get(|upgrade: WebSocketUpgrade| async move {
                upgrade.on_upgrade(|mut socket| async move {
                    while let Some(Ok(message)) = socket.recv().await {
                        if matches!(message, Message::Close(_))
                            || socket.send(message).await.is_err()
                        {
                            break;
                        }
                    }
                })
            }),
        )
        // Anything else: the path and query it was asked for, as it arrived.
        .fallback(any(|uri: http::Uri| async move { format!("path {uri}") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A running proxy and its configuration file.
pub(crate) struct Proxy {
    pub(crate) process: GatewayProcess,
    pub(crate) addr: String,
    pub(crate) config: PathBuf,
    /// What the first line said after the address.
    pub(crate) first_line: String,
}

pub(crate) fn config_text(upstream: SocketAddr, limit: u32) -> String {
    config_with(upstream, limit, "")
}

/// The test configuration, with `extra` lines in its `[proxy]` table.
pub(crate) fn config_with(upstream: SocketAddr, limit: u32, extra: &str) -> String {
    let proxy = proxy_table(
        upstream,
        &format!("{extra}\nwebsockets = {{ max_per_key = 1, key = {{ header = \"x-user\" }} }}"),
    );
    format!(
        r#"{proxy}
        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = {limit}, period = "1min" }}]

        [routes.api]
        paths = ["/api/"]
        policy = "api"
        key = {{ header = "x-api-key" }}
        "#
    )
}

/// The `[proxy]` table of a proxy in front of `upstream` on a free port, without an access log,
/// with `extra` lines.
pub(crate) fn proxy_table(upstream: SocketAddr, extra: &str) -> String {
    format!(
        r#"
        [proxy]
        listen = "127.0.0.1:0"
        upstream = "http://{upstream}"
        access_log = "off"
        {extra}
        "#
    )
}

/// A temporary file named `*.<extension>` holding `text`, removed when dropped.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl TempFile {
    pub(crate) fn new(extension: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "ratelimit-gateway-{}.{extension}",
            fastrand::u64(..)
        ));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Proxy {
    pub(crate) fn start(config: &str) -> Self {
        Self::start_with_stdout(config).0
    }

    /// The proxy, and its standard output (the access log).
    pub(crate) fn start_with_stdout(config: &str) -> (Self, Output) {
        Self::start_in(&std::env::temp_dir(), config)
    }

    /// The proxy of `config` written in `dir` (where its relative paths start), and its
    /// standard output.
    pub(crate) fn start_in(dir: &std::path::Path, config: &str) -> (Self, Output) {
        let path = dir.join(format!("proxy-{}.toml", fastrand::u64(..)));
        std::fs::write(&path, config).unwrap();
        let (process, line, stdout) = GatewayProcess::start("proxy", &path, None);
        let rest = line
            .strip_prefix("proxy: listening on ")
            .and_then(|rest| {
                rest.strip_prefix("http://")
                    .or_else(|| rest.strip_prefix("https://"))
            })
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let (addr, first_line) = rest.split_once(',').unwrap_or((rest, ""));
        let proxy = Proxy {
            process,
            addr: addr.to_owned(),
            config: path,
            first_line: first_line.trim().to_owned(),
        };
        (proxy, stdout)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Waits for the process to exit with status 0, failing the test after `within`.
    pub(crate) async fn exits_successfully_within(&mut self, within: Duration) {
        self.process.exits_successfully_within(within).await;
    }

    pub(crate) fn signal(&self, signal: &str) {
        self.process.signal(signal);
    }

    /// Its first message that contains `text`: said before its start-up line, or the next one
    /// after (the ones before it skipped).
    pub(crate) fn said(&self, text: &str) -> String {
        match self.process.before.iter().find(|line| line.contains(text)) {
            Some(line) => line.clone(),
            None => self.message_containing(text),
        }
    }

    /// Its next message (on standard error) that contains `text`, the ones before it skipped.
    pub(crate) fn message_containing(&self, text: &str) -> String {
        self.process.message_containing(text)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

/// A client whose requests fail after 30 s: a proxy that never answers fails its test instead of
/// hanging the suite.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub(crate) async fn get_with(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// `/readyz` of the admin listener at `admin`: its status and body.
pub(crate) async fn readyz(admin: std::net::SocketAddr) -> (u16, String) {
    let response = client()
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Asks `/readyz` until it answers `status`, for at most 10 s; its body.
pub(crate) async fn readyz_until(admin: std::net::SocketAddr, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = readyz(admin).await;
        if code == status {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz still {code}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `items` as a TOML array of strings: `["a", "b"]`.
pub(crate) fn toml_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// How many client keys of `rule` have windows on a Cluster ledger's primaries, per primary
/// (read with `KEYS`, as an operator would list them; a window lives two periods).
pub(crate) fn keys_per_primary(cluster: &testkit::cluster::RedisCluster, rule: &str) -> Vec<usize> {
    let pattern = format!("ratelimit:ledger:{rule}:*");
    cluster
        .primaries()
        .into_iter()
        .map(|primary| {
            cluster
                .node(primary)
                .cli(&["KEYS", &pattern])
                .lines()
                .filter_map(|name| name.split_once('{')?.1.split_once('}'))
                .map(|(client, _)| client.to_owned())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        })
        .collect()
}
