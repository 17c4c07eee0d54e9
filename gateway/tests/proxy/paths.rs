//! Routes match the normalised path: the variants of a limited path are limited with it, and
//! forwarded as the path that was limited; ambiguous ones are refused.

use crate::support::{Proxy, config_text, get_with, upstream};

/// A raw request: reqwest (like browsers) would normalise some of these paths itself.
async fn raw(proxy: &Proxy, path: &str, key: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(&proxy.addr).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: test\r\nx-api-key: {key}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_string(&mut answer),
    )
    .await
    .expect("an answer within 10 s")
    .unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_of_a_limited_path_are_limited_and_forwarded_as_matched() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_text(upstream, 6));
    let variants = [
        "/api/x",
        "/%61pi/x",
        "//api/x",
        "/./api/x",
        "/static/../api/x",
        "/%2E%2E/api//./x?q=1",
    ];
    for variant in variants {
        let (status, body) = raw(&proxy, variant, "k").await;
        assert_eq!(status, 200, "{variant}");
        // The upstream was asked for the path the route matched.
        let expected = if variant.ends_with("?q=1") {
            "path /api/x?q=1"
        } else {
            "path /api/x"
        };
        assert_eq!(body, expected, "{variant}");
    }
    // Six requests spent the key's quota of six, whatever their spelling.
    for variant in variants {
        assert_eq!(raw(&proxy, variant, "k").await.0, 429, "{variant}");
    }
    // Another key is not affected.
    assert_eq!(
        get_with(&proxy.url("/api/x"), &[("x-api-key", "other")])
            .await
            .status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_paths_are_refused() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_text(upstream, 100));
    for path in [
        "/api%2Fx",
        "/static%2f..%2fapi/x",
        "/api/%5Cx",
        "/api/%00",
        "/api/%zz",
    ] {
        let (status, body) = raw(&proxy, path, "k").await;
        assert_eq!(status, 400, "{path}");
        assert!(body.contains("\"status\":400"), "{path}: {body}");
    }
    // Escapes of other characters pass, in upper case.
    assert_eq!(
        raw(&proxy, "/open/a%20b%3f", "k").await,
        (200, "path /open/a%20b%3F".to_owned())
    );
}
