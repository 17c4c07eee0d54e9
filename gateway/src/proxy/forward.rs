//! [`Forward`]: sends a request on to the upstream and streams its answer back, tunnels upgrades.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http::header::{CONTENT_LENGTH, HOST};
use http::{HeaderValue, Request, Response, StatusCode, Uri, Version};
use http_body::Body as _;
use http_body_util::Either;
use tower_redis_ratelimit::Decision;
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;

use super::headers::{add_forwarding, is_upgrade, is_websocket, strip_hop_by_hop};
use super::load::Loaded;
use super::tunnel;
use super::upload::{Progress, Upload};
use super::upstream::Upstream;
use crate::runtime::logs::sentence;
use crate::runtime::{InFlight, Shutdown, problem, status_class, waited};

/// How a request is forwarded: to which upstream, with which bounds.
#[derive(Clone)]
pub(crate) struct Forward {
    upstream: Upstream,
    /// How long the upstream may take to start its answer once the request has been sent.
    timeout: Duration,
    /// The largest request body forwarded.
    max_body: u64,
    /// `http` or `https`: how clients reach the proxy.
    proto: &'static str,
    /// Tunnels close at the drain deadline.
    shutdown: Shutdown,
}

impl Forward {
    /// Forwarding as `loaded` says (its upstream, timeout and body limit): built with each
    /// load, so that a reload applies them; `proto` is how clients reach the proxy.
    pub(crate) fn new(loaded: &Loaded, proto: &'static str, shutdown: Shutdown) -> Self {
        Self {
            upstream: loaded.upstream.clone(),
            timeout: loaded.upstream_timeout,
            max_body: loaded.table.max_body_size.unwrap_or(u64::MAX),
            proto,
            shutdown,
        }
    }
}

impl tower::Service<Request<Body>> for Forward {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            // Admitted by a limit that decided (rather than skipped it: a store failing open,
            // a request without a key under `missing_key = "skip"`, an allowed key).
            let decided = request.extensions().get::<Decision>().is_some();
            let waited = waited(request.extensions());
            let mut response = this.forward(request).await;
            let status = response
                .extensions()
                .get::<UpstreamStatus>()
                .map(|UpstreamStatus(status)| *status);
            response.extensions_mut().insert(Forwarded {
                upstream_status: status,
                decided,
                waited,
            });
            Ok(response)
        })
    }
}

/// In a response's extensions: the request went past its limits to [`Forward`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forwarded {
    /// The upstream's status, if it answered.
    pub(crate) upstream_status: Option<u16>,
    /// Whether a limit decided to admit it.
    pub(crate) decided: bool,
    /// How long its limits made it wait before it was forwarded (routes' `max_delay`).
    pub(crate) waited: Duration,
}

/// The upstream's answer's status, marked on it before its headers are changed.
#[derive(Clone, Copy, Debug)]
struct UpstreamStatus(u16);

impl Forward {
    async fn forward(self, mut request: Request<Body>) -> Response<Body> {
        let upgrade = is_upgrade(&request);
        let websocket = upgrade && is_websocket(&request);
        let client_side = upgrade.then(|| hyper::upgrade::on(&mut request));
        // Held by the tunnel, when a concurrency limit admitted the upgrade.
        let permit = request.extensions().get::<ConcurrencyPermit>().cloned();
        // Keeps the client connection's timers off while the tunnel lives.
        let in_flight = request.extensions().get::<InFlight>().cloned();
        if declared_length(&request).is_some_and(|length| length > self.max_body) {
            return too_large(self.max_body);
        }
        let Some(prepared) = self.prepare(request, upgrade) else {
            return problem(
                StatusCode::BAD_REQUEST,
                "The request's target cannot be forwarded.",
            );
        };
        let (request, progress) = prepared;
        let answer = self.send(request, progress.as_deref()).await;
        let mut response = match answer {
            Ok(Ok(response)) => response,
            Ok(Err(_))
                if progress
                    .as_ref()
                    .is_some_and(|progress| progress.too_large()) =>
            {
                return too_large(self.max_body);
            }
            Ok(Err(err)) => return bad_gateway(&err),
            Err(Elapsed) => return gateway_timeout(self.timeout),
        };
        metrics::counter!(
            "gateway_upstream_responses_total",
            "status" => status_class(response.status()),
        )
        .increment(1);
        let status = UpstreamStatus(response.status().as_u16());
        response.extensions_mut().insert(status);
        if let (Some(client_side), StatusCode::SWITCHING_PROTOCOLS) =
            (client_side, response.status())
        {
            let upstream_side = hyper::upgrade::on(&mut response);
            let shutdown = self.shutdown.clone();
            tokio::spawn(async move {
                let _held = (permit, in_flight);
                if let (Ok(client), Ok(upstream)) = (client_side.await, upstream_side.await) {
                    tunnel::join(client, upstream, websocket, shutdown).await;
                }
            });
            return response.map(Body::new);
        }
        strip_hop_by_hop(response.headers_mut(), false);
        // The client is answered in the version it spoke (hyper writes the response's), not the
        // upstream's: an HTTP/1.0 upstream's answer would end a keep-alive connection.
        *response.version_mut() = Version::default();
        response.map(Body::new)
    }

    /// The request as the upstream gets it: its target, HTTP/1.1, the forwarding headers; its
    /// body watched unless it has none. `None` when its target cannot be forwarded.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        request: Request<Body>,
        upgrade: bool,
    ) -> Option<(Request<super::upstream::RequestBody>, Option<Arc<Progress>>)> {
        let peer = request.extensions().get::<SocketAddr>().map(SocketAddr::ip);
        let (mut parts, body) = request.into_parts();
        // The host the client named: its Host header, or (HTTP/2) the target's authority.
        let host = parts.headers.get(HOST).cloned().or_else(|| {
            parts
                .uri
                .authority()
                .and_then(|authority| HeaderValue::from_str(authority.as_str()).ok())
        });
        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        parts.uri = Uri::builder()
            .scheme(self.upstream.scheme.clone())
            .authority(self.upstream.authority.clone())
            .path_and_query(path)
            .build()
            .ok()?;
        // The upstream client speaks HTTP/1.1, whatever the client spoke to the proxy (an
        // HTTP/2 request forwarded as such fails in the client: a 502 for every request).
        parts.version = Version::HTTP_11;
        strip_hop_by_hop(&mut parts.headers, upgrade);
        if let Some(host) = &host
            && !parts.headers.contains_key(HOST)
        {
            parts.headers.insert(HOST, host.clone());
        }
        add_forwarding(&mut parts.headers, peer, self.proto, host);
        if body.is_end_stream() {
            return Some((Request::from_parts(parts, Either::Left(body)), None));
        }
        let (upload, progress) = Upload::new(body, self.max_body);
        Some((
            Request::from_parts(parts, Either::Right(upload)),
            Some(progress),
        ))
    }

    /// Sends `request`; the upstream has `timeout` to start its answer once the body has been
    /// sent whole (at once for a request without one).
    async fn send(
        &self,
        request: Request<super::upstream::RequestBody>,
        progress: Option<&Progress>,
    ) -> Result<Result<Response<hyper::body::Incoming>, hyper_util::client::legacy::Error>, Elapsed>
    {
        let answer = self.upstream.client().request(request);
        let Some(progress) = progress else {
            return tokio::time::timeout(self.timeout, answer)
                .await
                .map_err(|_| Elapsed);
        };
        tokio::pin!(answer);
        tokio::select! {
            answer = &mut answer => Ok(answer),
            () = async {
                progress.sent().await;
                tokio::time::sleep(self.timeout).await;
            } => Err(Elapsed),
        }
    }
}

/// The upstream did not answer in time.
struct Elapsed;

/// The request's `Content-Length`, if it says one.
fn declared_length<B>(request: &Request<B>) -> Option<u64> {
    request
        .headers()
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn bad_gateway(err: &hyper_util::client::legacy::Error) -> Response<Body> {
    tracing::warn!(error = %sentence(err), "the upstream cannot be reached");
    metrics::counter!("gateway_upstream_errors_total", "error" => "unreachable").increment(1);
    problem(
        StatusCode::BAD_GATEWAY,
        "The upstream service cannot be reached.",
    )
}

fn gateway_timeout(timeout: Duration) -> Response<Body> {
    tracing::warn!(
        timeout = %humantime::format_duration(timeout),
        "the upstream did not answer in time"
    );
    metrics::counter!("gateway_upstream_errors_total", "error" => "timeout").increment(1);
    problem(
        StatusCode::GATEWAY_TIMEOUT,
        "The upstream service did not answer in time.",
    )
}

fn too_large(max: u64) -> Response<Body> {
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("The request body is larger than {max} bytes."),
    )
}
