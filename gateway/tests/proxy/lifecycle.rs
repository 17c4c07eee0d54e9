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
