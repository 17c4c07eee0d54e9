//! What stands around a gateway in its live tests: the upstream it serves, and clients, each
//! from a loopback address of its own, whose requests cannot hang a test. Shared by the `serve`
//! and `envoy` test binaries.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::routing::any;

/// The upstream: answers every request with the path and query it was asked for, and the
/// request id it was given in `x-seen-request-id`.
pub(crate) async fn upstream() -> SocketAddr {
    let app = Router::new().fallback(any(|uri: http::Uri, headers: http::HeaderMap| async move {
        let id = headers.get("x-request-id").cloned();
        let id = id.unwrap_or(http::HeaderValue::from_static("-"));
        ([("x-seen-request-id", id)], format!("path {uri}"))
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A client whose requests leave from `from` (a loopback address: each one is a client of its
/// own) and fail after 30 s: a service that never answers fails its test instead of hanging
/// the suite.
pub(crate) fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .local_address(from.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// GET `url` from `from` with `headers`.
pub(crate) async fn get(from: &str, url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client_from(from).get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A header of `response`, as text ("-" when absent).
pub(crate) fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map_or("-".to_owned(), |value| value.to_str().unwrap().to_owned())
}
