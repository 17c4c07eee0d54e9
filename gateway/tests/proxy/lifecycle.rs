//! SIGTERM: what is in flight finishes, then the process exits.

use std::time::Duration;

use crate::support::{Proxy, client, config_text, upstream};

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
    proxy
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}

/// A reload applies what it can and names each field read at start only that changed: the
/// process still listens where it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_names_what_it_did_not_apply() {
    let upstream = upstream().await;
    let config = config_text(upstream, 3);
    let proxy = Proxy::start(&config);
    let elsewhere = crate::support::free_addr();
    let moved = config
        .replace(
            r#"listen = "127.0.0.1:0""#,
            &format!(r#"listen = "{elsewhere}""#),
        )
        .replace("limit = 3", "limit = 4");
    std::fs::write(&proxy.config, moved).unwrap();
    proxy.signal("-HUP");
    let message = proxy.message_containing("configuration reloaded");
    assert!(
        message.contains(&format!(
            "not applied until restart: proxy.listen (127.0.0.1:0 → {elsewhere})"
        )),
        "{message}"
    );
    assert!(message.contains("WARN"), "{message}");
    // The limits were applied, the address was not.
    let response = client()
        .get(proxy.url("/api/echo"))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["ratelimit-policy"], "\"api\";q=4;w=60");
}
