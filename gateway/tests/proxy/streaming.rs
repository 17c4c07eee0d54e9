//! Bodies stream both ways: nothing is buffered.

use std::time::{Duration, Instant};

use crate::support::{Proxy, client, config_text, upstream};

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
