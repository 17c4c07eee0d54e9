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

/// A body larger than `max_body_size` is refused with 413: at once when its length is declared,
/// as soon as it passes the limit when it is streamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_beyond_the_maximum_are_refused() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&crate::support::config_with(
        upstream,
        3,
        r#"max_body_size = "1KiB""#,
    ));
    let declared = client()
        .post(proxy.url("/open/upload"))
        .body(vec![b'x'; 1025])
        .send()
        .await
        .unwrap();
    assert_eq!(declared.status(), 413);
    let chunks =
        futures_util::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 400])));
    let streamed = client()
        .post(proxy.url("/open/upload"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 413);
    // At the limit, it passes.
    let fits = client()
        .post(proxy.url("/open/upload"))
        .body(vec![b'x'; 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(fits.text().await.unwrap(), "1024");
}
