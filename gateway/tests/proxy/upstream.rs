//! An upstream that is silent (504) or unreachable (502).

use std::time::{Duration, Instant};

use crate::support::{Proxy, client, config_text, get_with, upstream};

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
