//! The admin address: `/healthz` (the process is up), `/readyz` (it can do its work: the
//! configuration is loaded and its stores answer) and `/metrics` (Prometheus text), never
//! forwarded nor limited.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use super::{Connections, Listener, Shutdown, serve};

/// What `/readyz` asks: `Ok` when ready, or what is not.
pub type Readiness =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// How long `/readyz` waits for its answer before it says not ready.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Installs the process's Prometheus recorder: the crate's metrics and the gateway's own are
/// recorded from then on. Call once, before the first request.
pub fn install_metrics() -> Result<PrometheusHandle, super::BoxError> {
    Ok(PrometheusBuilder::new().install_recorder()?)
}

/// Serves the admin endpoints on `listener` until `shutdown` drains it. While draining,
/// `/readyz` answers 503: a load balancer stops sending requests before the listeners close.
pub async fn serve_admin(
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
        // Served beside the background tasks, not on the workers.
        workers: 0,
    };
    serve(listener, connections, handler, shutdown).await;
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
