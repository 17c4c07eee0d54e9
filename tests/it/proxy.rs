//! `examples/proxy`, run as a process in front of a small upstream started here: limits and
//! headers per route, unlimited paths, forwarding headers, streaming both ways, upstream errors
//! passed through, 502 for an unreachable upstream, WebSocket tunnels counted by a concurrency
//! limit, reload on SIGHUP with a tunnel open, and a clean exit on SIGTERM.
//!
//! `cargo test` builds the examples first; a filtered run needs `cargo build --examples`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::WebSocketUpgrade;
use axum::extract::ws::Message;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite;

use crate::support::example_binary;

/// The upstream: echoes forwarding headers, streams, counts uploads, fails, echoes WebSockets.
async fn upstream() -> SocketAddr {
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
                format!("{}|{}", header("x-forwarded-for"), header("forwarded"))
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
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A running proxy and its configuration file.
struct Proxy {
    child: Child,
    addr: String,
    config: PathBuf,
}

fn config_text(upstream: SocketAddr, limit: u32) -> String {
    config_with_metrics(upstream, limit, None)
}

/// The test configuration; with `metrics`, the proxy serves Prometheus metrics there.
fn config_with_metrics(upstream: SocketAddr, limit: u32, metrics: Option<SocketAddr>) -> String {
    let metrics = metrics.map_or(String::new(), |addr| format!("metrics = \"{addr}\""));
    format!(
        r#"
        [proxy]
        listen = "127.0.0.1:0"
        upstream = "http://{upstream}"
        {metrics}
        websockets = {{ max_per_key = 1, key = {{ header = "x-user" }} }}

        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = {limit}, period = "1min" }}]

        [routes.api]
        paths = ["/api/"]
        policy = "api"
        key = {{ header = "x-api-key" }}
        "#
    )
}

impl Proxy {
    fn start(config: &str) -> Self {
        let path = std::env::temp_dir().join(format!("proxy-{}.toml", fastrand::u64(..)));
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(example_binary("proxy"))
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("proxy: listening on http://")
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Proxy {
            child,
            addr,
            config: path,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

/// A client whose requests fail after 30 s: a proxy that never answers fails its test instead of
/// hanging the suite.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn get_with(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_headers_forwarding_and_upstream_errors() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_text(upstream, 3));
    // Two X-Forwarded-For lines, as a chain of proxies may send them.
    let key = [
        ("x-api-key", "k1"),
        ("x-forwarded-for", "203.0.113.1"),
        ("x-forwarded-for", "198.51.100.9"),
    ];
    for remaining in [2, 1, 0] {
        let response = get_with(&proxy.url("/api/echo"), &key).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["ratelimit"],
            format!("\"api\";r={remaining};t=60").as_str()
        );
        assert_eq!(response.headers()["ratelimit-policy"], "\"api\";q=3;w=60");
        // The client's address appended to the X-Forwarded-For it sent, and as a Forwarded
        // element.
        assert_eq!(
            response.text().await.unwrap(),
            "203.0.113.1, 198.51.100.9, 127.0.0.1|for=127.0.0.1"
        );
    }
    let refused = get_with(&proxy.url("/api/echo"), &key).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "60");
    // Paths of no route pass unlimited, without rate-limit headers.
    for _ in 0..5 {
        let response = get_with(&proxy.url("/open/fail"), &key).await;
        // The upstream's error, unchanged.
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()["x-upstream"], "yes");
        assert!(!response.headers().contains_key("ratelimit"));
        assert_eq!(response.text().await.unwrap(), "upstream broke");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_both_ways() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_text(upstream, 3));
    let started = Instant::now();
    let mut response = client()
        .get(proxy.url("/open/stream"))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    let first_at = started.elapsed();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(first, "first;");
    assert_eq!(rest, b"last");
    // The first chunk came through before the upstream sent the last, 500 ms later.
    assert!(
        started.elapsed() - first_at >= Duration::from_millis(300),
        "first chunk at {first_at:?}, all at {:?}",
        started.elapsed()
    );
    // A large upload arrives whole.
    let body = vec![b'x'; 8 << 20];
    let uploaded = client()
        .post(proxy.url("/open/upload"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.text().await.unwrap(), (8 << 20).to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_served_as_prometheus_metrics() {
    let upstream = upstream().await;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = Proxy::start(&config_with_metrics(upstream, 2, Some(metrics)));
    for _ in 0..3 {
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "m")]).await;
    }
    let text = client()
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = |outcome: &str| {
        text.lines()
            .find(|line| {
                line.starts_with("ratelimit_decisions_total{")
                    && line.contains(&format!("outcome=\"{outcome}\""))
            })
            .unwrap_or_else(|| panic!("no {outcome} decisions in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        (sample("allowed"), sample("denied")),
        ("2".to_owned(), "1".to_owned())
    );
}

/// A `[concurrency]` limit of the file holds its slot while the upstream's answer streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_holds_a_slot_while_the_answer_streams() {
    let upstream = upstream().await;
    let config = format!(
        r#"{}
        [concurrency.streams]
        paths = ["/open/stream"]
        max_in_flight = 1
        key = {{ header = "x-user" }}
        "#,
        config_text(upstream, 3)
    );
    let proxy = Proxy::start(&config);
    let ann = [("x-user", "ann")];
    let mut streaming = get_with(&proxy.url("/open/stream"), &ann).await;
    assert_eq!(streaming.status(), 200);
    assert_eq!(streaming.chunk().await.unwrap().unwrap(), "first;");
    let refused = get_with(&proxy.url("/open/stream"), &ann).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(
        refused.headers()["ratelimit-policy"],
        "\"streams\";q=1;qu=\"concurrent-requests\""
    );
    assert_eq!(
        get_with(&proxy.url("/open/stream"), &[("x-user", "bob")])
            .await
            .status(),
        200
    );
    // Other paths are not counted.
    assert_eq!(get_with(&proxy.url("/open/fail"), &ann).await.status(), 500);
    while streaming.chunk().await.unwrap().is_some() {}
    drop(streaming);
    let deadline = Instant::now() + Duration::from_secs(10);
    while get_with(&proxy.url("/open/stream"), &ann).await.status() != 200 {
        assert!(Instant::now() < deadline, "ann's slot was not given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_does_not_answer_in_time_is_a_504() {
    let upstream = upstream().await;
    let config = config_text(upstream, 3).replace(
        &format!(r#"upstream = "http://{upstream}""#),
        &format!("upstream = \"http://{upstream}\"\n        upstream_timeout = \"200ms\""),
    );
    assert!(config.contains("upstream_timeout"));
    let proxy = Proxy::start(&config);
    let started = Instant::now();
    let response = get_with(&proxy.url("/open/hang"), &[]).await;
    assert_eq!(response.status(), 504);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    // Other requests are not held up by it.
    assert_eq!(get_with(&proxy.url("/open/fail"), &[]).await.status(), 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_a_502() {
    // A port bound and not listening: connections to it are refused, and no other test's server
    // can take it while this one runs (a port merely closed could be, by a server that never
    // answers).
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = reserved.local_addr().unwrap();
    let proxy = Proxy::start(&config_text(closed, 3));
    let response = client()
        .get(proxy.url("/open/anything"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
}

async fn connect_ws(
    proxy: &Proxy,
    user: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tungstenite::Error,
> {
    use tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{}/ws", proxy.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("x-user", user.parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_tunnel_are_limited_and_survive_a_reload() {
    let upstream = upstream().await;
    // A concurrency limit on the same path too: the tunnel still holds the WebSocket slot.
    let config = format!(
        r#"{}
        [concurrency.sockets]
        paths = ["/ws"]
        max_in_flight = 5
        key = {{ header = "x-user" }}
        "#,
        config_text(upstream, 1)
    );
    let proxy = Proxy::start(&config);
    let mut socket = connect_ws(&proxy, "ann").await.unwrap();
    socket
        .send(tungstenite::Message::text("hello"))
        .await
        .unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed.to_text().unwrap(), "hello");
    // One tunnel per user: a second one for ann is refused, bob's passes.
    match connect_ws(&proxy, "ann").await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 429),
        other => panic!("a second tunnel for ann: {:?}", other.map(|_| ())),
    }
    drop(connect_ws(&proxy, "bob").await.unwrap());

    // Reload with a limit of 4: new requests get it; ann's tunnel stays open through it.
    assert_eq!(
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "r")])
            .await
            .status(),
        200
    );
    assert_eq!(
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "r")])
            .await
            .status(),
        429
    );
    std::fs::write(&proxy.config, config_text(upstream, 4)).unwrap();
    proxy.signal("-HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "after")]).await;
        if response.headers()["ratelimit-policy"] == "\"api\";q=4;w=60" {
            break;
        }
        assert!(Instant::now() < deadline, "the reload did not take");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The counts went on in the same in-process store: "r" had used 1 of the new 4.
    let statuses = {
        let mut statuses = Vec::new();
        for _ in 0..4 {
            let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "r")]).await;
            statuses.push(response.status().as_u16());
        }
        statuses
    };
    assert_eq!(statuses, [200, 200, 200, 429]);
    socket
        .send(tungstenite::Message::text("still"))
        .await
        .unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed.to_text().unwrap(), "still");

    // A closed tunnel gives its slot back.
    socket.close(None).await.unwrap();
    drop(socket);
    let deadline = Instant::now() + Duration::from_secs(10);
    while connect_ws(&proxy, "ann").await.is_err() {
        assert!(Instant::now() < deadline, "ann's slot was not given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_what_is_in_flight_then_exits() {
    let upstream = upstream().await;
    let mut proxy = Proxy::start(&config_text(upstream, 3));
    assert_eq!(
        client()
            .get(proxy.url("/open/fail"))
            .send()
            .await
            .unwrap()
            .status(),
        500
    );
    // A response half sent when SIGTERM comes is still sent whole.
    let mut streaming = client()
        .get(proxy.url("/open/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(streaming.chunk().await.unwrap().unwrap(), "first;");
    proxy.signal("-TERM");
    assert_eq!(streaming.chunk().await.unwrap().unwrap(), "last");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// README's proxy configuration (its section's TOML block) loads and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_configuration_runs() {
    let upstream = upstream().await;
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let section = readme
        .split("## In front of a service in any language")
        .nth(1)
        .expect("README's proxy section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a TOML block in README's proxy section");
    let config = block
        .replace(r#"listen = "127.0.0.1:8080""#, r#"listen = "127.0.0.1:0""#)
        .replace(
            r#"upstream = "http://127.0.0.1:3000""#,
            &format!(r#"upstream = "http://{upstream}""#),
        );
    assert_ne!(config, block, "README's listen and upstream lines changed");
    let proxy = Proxy::start(&config);
    let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "readme")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["ratelimit-policy"],
        "\"api-burst\";q=20;w=2, \"api-hourly\";q=5000;w=3600"
    );
}

/// `examples/proxy/proxy.toml`, the file README and `docs/proxy.md` show, runs as documented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_configuration_runs() {
    let upstream = upstream().await;
    let example = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/proxy/proxy.toml"),
    )
    .unwrap();
    let config = example
        .replace(r#"listen = "127.0.0.1:8080""#, r#"listen = "127.0.0.1:0""#)
        .replace(
            r#"upstream = "http://127.0.0.1:3000""#,
            &format!(r#"upstream = "http://{upstream}""#),
        );
    assert_ne!(
        config, example,
        "the example's listen and upstream lines changed"
    );
    let proxy = Proxy::start(&config);
    // The API: a GCRA burst of 20 and an hourly window of 5000 per key.
    let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "ex")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["ratelimit-policy"],
        "\"api-burst\";q=20;w=2, \"api-hourly\";q=5000;w=3600"
    );
    // Login: 5 a minute per client address, then 429.
    for _ in 0..5 {
        assert_eq!(
            client()
                .get(proxy.url("/login"))
                .send()
                .await
                .unwrap()
                .status(),
            404
        );
    }
    let refused = client().get(proxy.url("/login")).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
}
