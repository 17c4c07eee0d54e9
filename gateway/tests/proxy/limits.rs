//! Limits and headers per route, unlimited paths, forwarding headers, upstream errors passed
//! through, and a concurrency limit holding its slot while the answer streams.

use std::time::{Duration, Instant};

use crate::support::{Proxy, config_text, get_with, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_headers_forwarding_and_upstream_errors() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_text(upstream, 3));
    // Two X-Forwarded-For lines, as a chain of proxies may send them.
    let key = [
        ("x-api-key", "k1"),
        ("x-forwarded-for", "203.0.113.1"),
        ("x-forwarded-for", "198.51.100.9"),
        // Replaced: the proxy says how the client reached it.
        ("x-forwarded-proto", "https"),
        ("x-request-id", "req-1"),
    ];
    for remaining in [2, 1, 0] {
        let response = get_with(&proxy.url("/api/echo"), &key).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["ratelimit"],
            format!("\"api\";r={remaining};t=60").as_str()
        );
        assert_eq!(response.headers()["ratelimit-policy"], "\"api\";q=3;w=60");
        // The request id passed on both ways.
        assert_eq!(response.headers()["x-request-id"], "req-1");
        // The client's address appended to the X-Forwarded-For it sent, and as a Forwarded
        // element; how the client reached the proxy (plain HTTP, this host).
        assert_eq!(
            response.text().await.unwrap(),
            format!(
                "203.0.113.1, 198.51.100.9, 127.0.0.1|for=127.0.0.1;proto=http|http|{}|req-1",
                proxy.addr
            )
        );
    }
    let refused = get_with(&proxy.url("/api/echo"), &key).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["x-request-id"], "req-1");
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
