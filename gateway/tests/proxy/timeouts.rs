//! Connections: a request head must arrive within the header timeout, an idle keep-alive
//! connection is closed after the idle timeout, at most `max` connections are served at once;
//! the upstream timeout counts from the end of the request's body.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Proxy, client, config_with, upstream};

/// Reads until the connection closes or `within` passes: whether it closed, and what it read.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> (bool, String) {
    let mut read = Vec::new();
    let closed = tokio::time::timeout(within, async {
        let mut buffer = [0; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .is_ok();
    (closed, String::from_utf8_lossy(&read).into_owned())
}

const GET: &[u8] = b"GET /open/x HTTP/1.1\r\nHost: test\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_head_then_nothing_is_closed_after_the_header_timeout() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_with(
        upstream,
        10,
        r#"connections = { header_timeout = "300ms", idle_timeout = "10s" }"#,
    ));
    let mut stream = TcpStream::connect(&proxy.addr).await.unwrap();
    let started = Instant::now();
    stream
        .write_all(b"GET /open/x HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let (closed, _) = closed_within(&mut stream, Duration::from_secs(5)).await;
    assert!(closed, "a half-sent head still open after 5 s");
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(250),
        "closed after {after:?}"
    );

    // A connection that sends nothing is closed too.
    let mut silent = TcpStream::connect(&proxy.addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_with(
        upstream,
        10,
        r#"connections = { header_timeout = "300ms", idle_timeout = "4s" }"#,
    ));
    let mut stream = TcpStream::connect(&proxy.addr).await.unwrap();
    stream.write_all(GET).await.unwrap();
    let mut buffer = [0; 4096];
    let n = stream.read(&mut buffer).await.unwrap();
    assert!(buffer[..n].starts_with(b"HTTP/1.1 200"));
    // Idle twice the header timeout: kept, the idle timeout is the longer one (by seconds, so
    // that a stalled test process cannot pass it unnoticed).
    tokio::time::sleep(Duration::from_millis(600)).await;
    stream.write_all(GET).await.unwrap();
    let n = stream.read(&mut buffer).await.unwrap();
    assert!(
        buffer[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buffer[..n])
    );
    // Then idle past it: closed.
    let started = Instant::now();
    let (closed, _) = closed_within(&mut stream, Duration::from_secs(15)).await;
    assert!(closed, "an idle connection still open after 15 s");
    // A timer never fires early: this lower bound holds on any machine.
    assert!(
        started.elapsed() >= Duration::from_millis(3800),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_one_to_close() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_with(
        upstream,
        10,
        r#"connections = { max = 2, idle_timeout = "30s", header_timeout = "30s" }"#,
    ));
    let mut first = TcpStream::connect(&proxy.addr).await.unwrap();
    let mut second = TcpStream::connect(&proxy.addr).await.unwrap();
    for stream in [&mut first, &mut second] {
        stream.write_all(GET).await.unwrap();
        let mut buffer = [0; 4096];
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(buffer[..n].starts_with(b"HTTP/1.1 200"));
    }
    // The third is queued by the kernel, and not served while two are open.
    let mut third = TcpStream::connect(&proxy.addr).await.unwrap();
    third.write_all(GET).await.unwrap();
    let mut buffer = [0; 4096];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buffer)).await;
    assert!(early.is_err(), "served beyond the cap");
    drop(first);
    let n = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buffer))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert!(buffer[..n].starts_with(b"HTTP/1.1 200"));
}

/// An upload slower than `upstream_timeout` is not cut off: the timeout starts once the body
/// has been sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_is_not_cut_off_by_the_upstream_timeout() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_with(upstream, 10, r#"upstream_timeout = "300ms""#));
    let chunks = futures_util::stream::unfold(0, |sent| async move {
        if sent == 8 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        Some((Ok::<_, std::io::Error>(vec![b'x'; 1000]), sent + 1))
    });
    let started = Instant::now();
    let response = client()
        .post(proxy.url("/open/upload"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "8000");
    // A silent upstream is still a 504 once the body is sent.
    let hung = client().get(proxy.url("/open/hang")).send().await.unwrap();
    assert_eq!(hung.status(), 504);
}
