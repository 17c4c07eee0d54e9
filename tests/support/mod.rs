//! Shared by the integration tests: private Redis servers (from `testkit`, which the benchmarks
//! share) and small HTTP helpers.
//!
//! Every test starts its own `redis-server` on a free port, so tests run in parallel and may kill,
//! freeze and restart their server. A missing `redis-server` fails the test with instructions.

pub(crate) mod logs;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, Response};
use http_body_util::BodyExt;
pub(crate) use testkit::RedisServer;
#[cfg(feature = "cluster")]
pub(crate) use testkit::cluster;
#[cfg(feature = "sentinel")]
pub(crate) use testkit::sentinel;
use tower::ServiceExt;

/// The example binary `name`: `target/<profile>/examples/<name>`, next to the test binary
/// `target/<profile>/deps/it-<hash>`. A plain `cargo test` builds the examples before it runs the
/// tests; a filtered run (`cargo test --test it client`) needs `cargo build --examples` first.
pub(crate) fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "the {name} example is not built ({} is missing): run `cargo build --examples` \
         (a plain `cargo test` builds it too)",
        binary.display()
    );
    binary
}

/// Runs an example to its end and returns what it printed, failing the test with all it printed
/// if it failed.
pub(crate) fn success_output(example: &mut std::process::Command) -> String {
    let output = example.output().expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
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

/// The request cost a test sends in an `x-cost` header: its value, or 1 without one.
pub(crate) fn cost(parts: &http::request::Parts) -> u32 {
    parts
        .headers
        .get("x-cost")
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

/// The plan a test sends in an `x-plan` header, for a layer's `choose_plan`.
pub(crate) fn plan(parts: &http::request::Parts) -> Option<tower_redis_ratelimit::rate::Plan> {
    let plan = parts.headers.get("x-plan")?.to_str().ok()?;
    Some(tower_redis_ratelimit::rate::Plan::new(plan))
}
