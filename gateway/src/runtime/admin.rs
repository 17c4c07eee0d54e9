//! The admin address: `/healthz` (the process is up), `/readyz` (it can do its work: the
//! configuration is loaded and its stores answer, and it is not shutting down), `/metrics`
//! (Prometheus text) and `POST /reset` (lifting a ban: [`super::admin_reset`]), never forwarded
//! nor limited. It answers until the process exits, through the whole shutdown: a load balancer
//! must see `/readyz` turn 503, not a refused connection.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;

use super::admin_access::AdminAccess;
use super::reset::Resetter;
use super::text::text;
use super::{Connections, Listener, Shutdown, ShutdownTrigger, Workers, serve_connections};

/// What `/readyz` asks: `Ok` when ready, or what is not.
pub type Readiness =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// How long `/readyz` waits for its answer before it says not ready.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The admin address of a command, bound, with the process's Prometheus recorder.
pub struct Admin {
    listener: Listener,
    metrics: PrometheusHandle,
    access: AdminAccess,
}

impl Admin {
    /// Binds `addr`, if the file names one, and installs the process's Prometheus recorder:
    /// the crate's metrics and the gateway's own are recorded from then on. Once a process.
    /// `access` says who may reset.
    pub async fn bind(
        addr: Option<SocketAddr>,
        access: AdminAccess,
    ) -> Result<Option<Admin>, super::BoxError> {
        let Some(addr) = addr else {
            return Ok(None);
        };
        let listener = Listener::tcp(addr).await?;
        let metrics = super::prometheus::install()?;
        Ok(Some(Admin {
            listener,
            metrics,
            access,
        }))
    }

    /// Where it listens.
    pub fn address(&self) -> std::io::Result<super::Address> {
        self.listener.address()
    }

    /// Serves the admin endpoints on a task of its own, through the whole shutdown: `/readyz`
    /// asks `ready` (503 once `shutdown` says the process is leaving), `POST /reset` asks
    /// `resetter`. The command aborts the task when it has drained (the process exits then; a
    /// program that embeds the command goes on without the admin address).
    pub fn spawn(
        self,
        ready: Readiness,
        resetter: Resetter,
        shutdown: Shutdown,
    ) -> tokio::task::AbortHandle {
        let endpoints = Endpoints {
            metrics: self.metrics,
            access: self.access,
            ready,
            resetter,
            shutdown,
        };
        tokio::spawn(serve_admin(self.listener, Arc::new(endpoints))).abort_handle()
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

/// What the admin endpoints answer from.
struct Endpoints {
    metrics: PrometheusHandle,
    access: AdminAccess,
    ready: Readiness,
    resetter: Resetter,
    /// The process's: `/readyz` answers 503 once it is leaving.
    shutdown: Shutdown,
}

/// Serves the admin endpoints on `listener` for as long as the process runs.
async fn serve_admin(listener: Listener, endpoints: Arc<Endpoints>) {
    let handler = move |request: Request<hyper::body::Incoming>| {
        let endpoints = Arc::clone(&endpoints);
        async move { answer(request, &endpoints).await }
    };
    // A few connections, quick timers: a prober's requests are small.
    let connections = Connections {
        max: 64,
        header_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        drain_delay: Duration::ZERO,
        drain_timeout: Duration::ZERO,
        // Served beside the background tasks (`Workers::none`), not on the workers.
        workers: 0,
        any_authority: false,
        // Scrapes and probes are not the traffic `gateway_connections_open` tells of.
        counted: false,
    };
    // A shutdown of its own that never drains (its trigger is gone): the admin address
    // answers until the process exits.
    let (_, never) = ShutdownTrigger::new();
    serve_connections(listener, connections, Workers::none(), handler, never).await;
}

async fn answer(request: Request<hyper::body::Incoming>, endpoints: &Endpoints) -> Response<Body> {
    let path = request.uri().path();
    let probe = matches!(path, "/healthz" | "/readyz" | "/metrics");
    let method = request.method();
    if probe && method != Method::GET && method != Method::HEAD {
        return not_allowed("GET, HEAD");
    }
    if path == "/reset" && method != Method::POST {
        return not_allowed("POST");
    }
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n".to_owned()),
        "/readyz" if endpoints.shutdown.is_leaving() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down\n".to_owned(),
        ),
        "/readyz" => match tokio::time::timeout(READY_TIMEOUT, (endpoints.ready)()).await {
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
            let mut response = text(StatusCode::OK, endpoints.metrics.render());
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            response
        }
        "/reset" => {
            super::admin_reset::reset(request, &endpoints.access, &endpoints.resetter).await
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "the admin address serves /healthz, /readyz, /metrics and POST /reset\n".to_owned(),
        ),
    }
}

/// 405, with the methods the path takes (RFC 9110 requires `Allow` on a 405).
fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut response = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("this path takes {allow} only\n"),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}
