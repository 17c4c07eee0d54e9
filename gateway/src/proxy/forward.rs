//! [`Forward`]: sends a request on to the upstream and streams its answer back, tunnels upgrades.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http::header::{CONNECTION, CONTENT_TYPE, HeaderName, UPGRADE};
use http::uri::{Authority, Scheme};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;

use crate::server::{BoxError, InFlight};

/// Headers about one connection, not the message: never forwarded (RFC 9110, 7.6.1), except
/// `Connection` and `Upgrade` on an upgrade.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
];

/// The upstream, and a keep-alive pool of connections to it.
#[derive(Clone)]
pub(crate) struct Forward {
    client: Client<HttpConnector, Body>,
    scheme: Scheme,
    authority: Authority,
    /// How long the upstream may take to start its answer: then 504.
    timeout: Duration,
}

impl Forward {
    pub(crate) fn new(upstream: &str, timeout: Duration) -> Result<Self, BoxError> {
        let uri: Uri = upstream
            .parse()
            .map_err(|err| format!("upstream {upstream:?} is not a URL: {err}"))?;
        if uri.scheme() != Some(&Scheme::HTTP) {
            return Err(
                format!("upstream {upstream:?}: only http:// upstreams are supported").into(),
            );
        }
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| format!("upstream {upstream:?} has no host"))?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        connector.set_nodelay(true);
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            scheme: Scheme::HTTP,
            authority,
            timeout,
        })
    }
}

/// Whether `request` asks to switch protocols (a WebSocket).
pub(crate) fn is_upgrade<B>(request: &Request<B>) -> bool {
    request.headers().contains_key(UPGRADE)
        && request
            .headers()
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|value| {
                value
                    .split(',')
                    .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
            })
}

impl tower::Service<Request<Body>> for Forward {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let upgrade = is_upgrade(&request);
            let client_side = upgrade.then(|| hyper::upgrade::on(&mut request));
            // Held by the tunnel, when a concurrency limit admitted the upgrade.
            let permit = request.extensions().get::<ConcurrencyPermit>().cloned();
            // Keeps the client connection's timers off while the tunnel lives.
            let in_flight = request.extensions().get::<InFlight>().cloned();
            let peer = request.extensions().get::<SocketAddr>().map(SocketAddr::ip);
            if this.prepare(&mut request, peer, upgrade).is_err() {
                return Ok(problem(
                    StatusCode::BAD_REQUEST,
                    "The request's target cannot be forwarded.",
                ));
            }
            let answer = tokio::time::timeout(this.timeout, this.client.request(request)).await;
            let mut response = match answer {
                Ok(Ok(response)) => response,
                Ok(Err(err)) => return Ok(bad_gateway(&err)),
                Err(_) => return Ok(gateway_timeout(this.timeout)),
            };
            if let (Some(client_side), StatusCode::SWITCHING_PROTOCOLS) =
                (client_side, response.status())
            {
                let upstream_side = hyper::upgrade::on(&mut response);
                tokio::spawn(async move {
                    let _held = (permit, in_flight);
                    if let (Ok(client), Ok(upstream)) = (client_side.await, upstream_side.await) {
                        let (mut client, mut upstream) =
                            (TokioIo::new(client), TokioIo::new(upstream));
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
                return Ok(response.map(Body::new));
            }
            strip_hop_by_hop(response.headers_mut(), false);
            Ok(response.map(Body::new))
        })
    }
}

impl Forward {
    /// Points `request` at the upstream and adds the forwarding headers; an error when its
    /// target cannot be forwarded.
    fn prepare(
        &self,
        request: &mut Request<Body>,
        peer: Option<IpAddr>,
        upgrade: bool,
    ) -> Result<(), http::Error> {
        let path = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        *request.uri_mut() = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()?;
        let headers = request.headers_mut();
        strip_hop_by_hop(headers, upgrade);
        if let Some(peer) = peer {
            append(
                headers,
                HeaderName::from_static("x-forwarded-for"),
                &peer.to_string(),
                ", ",
            );
            let node = match peer {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("\"[{v6}]\""),
            };
            append(
                headers,
                HeaderName::from_static("forwarded"),
                &format!("for={node}"),
                ", ",
            );
        }
        Ok(())
    }
}

/// Sets `name` to its values so far (all its lines, in order) followed by `value`.
fn append(headers: &mut HeaderMap, name: HeaderName, value: &str, separator: &str) {
    let mut joined = headers
        .get_all(&name)
        .iter()
        .filter_map(|existing| existing.to_str().ok())
        .collect::<Vec<_>>()
        .join(separator);
    if !joined.is_empty() {
        joined.push_str(separator);
    }
    joined.push_str(value);
    if let Ok(joined) = HeaderValue::from_str(&joined) {
        headers.insert(name, joined);
    }
}

/// Removes the hop-by-hop headers (and those `Connection` names), keeping `Connection` and
/// `Upgrade` on an upgrade.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .filter(|name| !(upgrade && *name == UPGRADE))
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        if upgrade && name == "connection" {
            continue;
        }
        headers.remove(name);
    }
    if !upgrade {
        headers.remove(UPGRADE);
    }
}

fn bad_gateway(err: &hyper_util::client::legacy::Error) -> Response<Body> {
    tracing::warn!(error = %err, "the upstream cannot be reached");
    problem(
        StatusCode::BAD_GATEWAY,
        "The upstream service cannot be reached.",
    )
}

fn gateway_timeout(timeout: Duration) -> Response<Body> {
    tracing::warn!(?timeout, "the upstream did not answer in time");
    problem(
        StatusCode::GATEWAY_TIMEOUT,
        "The upstream service did not answer in time.",
    )
}

pub(crate) fn problem(status: StatusCode, detail: &str) -> Response<Body> {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "detail": detail,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}
