//! What stands around a gateway in its live tests: the upstream it serves, and clients, each
//! from a loopback address of its own, whose requests cannot hang a test. Shared by the `serve`
//! and `envoy` test binaries.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::routing::any;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

/// The upstream: answers every request with the path and query it was asked for, the request
/// id it was given in `x-seen-request-id`, and the rate-limit headers its request carried
/// (Traefik and Caddy add them to the request) in `x-seen-ratelimit` and
/// `x-seen-ratelimit-policy`.
pub(crate) async fn upstream() -> SocketAddr {
    let app = Router::new().fallback(any(|uri: http::Uri, headers: http::HeaderMap| async move {
        let id = headers.get("x-request-id").cloned();
        let id = id.unwrap_or(http::HeaderValue::from_static("-"));
        let mut seen = http::HeaderMap::new();
        seen.insert("x-seen-request-id", id);
        for (name, as_seen) in [
            ("ratelimit", "x-seen-ratelimit"),
            ("ratelimit-policy", "x-seen-ratelimit-policy"),
        ] {
            if let Some(value) = headers.get(name) {
                seen.insert(as_seen, value.clone());
            }
        }
        (seen, format!("path {uri}"))
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

/// An answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    /// A header, as text ("-" when absent).
    pub(crate) fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map_or("-".to_owned(), |value| value.to_str().unwrap().to_owned())
    }
}

/// GET `target` on `to` from `from` (a loopback address: each one is a client of its own)
/// with `headers`, over HTTP/1.1 on a connection of its own. The target goes out exactly as
/// written: reqwest, like browsers, would resolve `/./api/x` and `/static/../api/x` itself.
/// Fails after 30 s: a gateway that never answers fails its test instead of hanging it.
pub(crate) async fn raw_get(
    from: &str,
    to: SocketAddr,
    target: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let asked = async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::new(from.parse().unwrap(), 0))
            .unwrap();
        let stream = socket.connect(to).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut request = http::Request::get(target).header(http::header::HOST, to.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let (parts, body) = sender.send_request(request).await.unwrap().into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    };
    tokio::time::timeout(Duration::from_secs(30), asked)
        .await
        .unwrap_or_else(|_| panic!("no answer to GET {target} within 30 s"))
}
