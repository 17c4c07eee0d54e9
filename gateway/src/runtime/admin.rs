//! The admin address: `/healthz` (the process is up), `/readyz` (it can do its work: the
//! configuration is loaded and its stores answer) and `/metrics` (Prometheus text), never
//! forwarded nor limited.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use super::{Connections, Listener, Shutdown, Workers, serve_connections};

/// What `/readyz` asks: `Ok` when ready, or what is not.
pub type Readiness =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// How long `/readyz` waits for its answer before it says not ready.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The admin address of a command, bound, with the process's Prometheus recorder.
pub struct Admin {
    listener: Listener,
    metrics: PrometheusHandle,
}

impl Admin {
    /// Binds `addr`, if the file names one, and installs the process's Prometheus recorder:
    /// the crate's metrics and the gateway's own are recorded from then on. Once a process.
    pub async fn bind(addr: Option<SocketAddr>) -> Result<Option<Admin>, super::BoxError> {
        let Some(addr) = addr else {
            return Ok(None);
        };
        let listener = Listener::tcp(addr).await?;
        let metrics = PrometheusBuilder::new().install_recorder()?;
        Ok(Some(Admin { listener, metrics }))
    }

    /// Where it listens.
    pub fn address(&self) -> std::io::Result<super::Address> {
        self.listener.address()
    }

    /// Serves the admin endpoints, `/readyz` asking `ready`, on a task of its own until
    /// `shutdown` drains it.
    pub fn spawn(self, ready: Readiness, shutdown: Shutdown) {
        tokio::spawn(serve_admin(self.listener, self.metrics, ready, shutdown));
    }
}

/// Counts an answered request in the gateway's metrics: `gateway_requests_total` by what the
/// limits decided and the answer's status class, and its latency.
pub fn count_request(decision: &'static str, status: StatusCode, latency: Duration) {
    metrics::counter!(
        "gateway_requests_total",
        "decision" => decision,
        "status" => status_class(status),
    )
    .increment(1);
    metrics::histogram!("gateway_request_duration_seconds").record(latency.as_secs_f64());
}

/// `2xx` and the like: a label of few values.
pub fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Serves the admin endpoints on `listener` until `shutdown` drains it. While draining,
/// `/readyz` answers 503: a load balancer stops sending requests before the listeners close.
async fn serve_admin(
    listener: Listener,
    metrics: PrometheusHandle,
    ready: Readiness,
    shutdown: Shutdown,
) {
    let watching = shutdown.clone();
    let handler = move |request: Request<hyper::body::Incoming>| {
        let (metrics, ready, shutdown) = (metrics.clone(), Arc::clone(&ready), watching.clone());
        async move { answer(request, &metrics, &ready, &shutdown).await }
    };
    // A few connections, quick timers: a prober's requests are small.
    let connections = Connections {
        max: 64,
        header_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        drain_timeout: Duration::ZERO,
        // Served beside the background tasks (`Workers::none`), not on the workers.
        workers: 0,
        any_authority: false,
    };
    serve_connections(listener, connections, Workers::none(), handler, shutdown).await;
}

async fn answer(
    request: Request<hyper::body::Incoming>,
    metrics: &PrometheusHandle,
    ready: &Readiness,
    shutdown: &Shutdown,
) -> Response<Body> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".to_owned());
    }
    match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n".to_owned()),
        "/readyz" if shutdown.is_draining() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down\n".to_owned(),
        ),
        "/readyz" => match tokio::time::timeout(READY_TIMEOUT, ready()).await {
            Ok(Ok(())) => text(StatusCode::OK, "ready\n".to_owned()),
            Ok(Err(why)) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
            Err(_) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: no answer within {READY_TIMEOUT:?}\n"),
            ),
        },
        "/metrics" => {
            let mut response = text(StatusCode::OK, metrics.render());
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "the admin address serves /healthz, /readyz and /metrics\n".to_owned(),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
