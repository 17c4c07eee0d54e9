//! Run with: cargo run --release --example proxy -- CONFIG_FILE
//!
//! A rate-limiting reverse proxy: put it in front of a service written in any language, and the
//! limits of a configuration file apply to its routes (a sidecar, or a gateway).
//!
//! The file (TOML) holds a `[proxy]` table and the crate's limits (`stores`, `policies`,
//! `routes`, `concurrency`, `shadow`: see `docs/configuration.md`); each route's and concurrency
//! limit's `paths` are the path prefixes it limits, the longest matching prefix wins, and other
//! paths pass unlimited:
//!
//! ```toml
//! [proxy]
//! listen = "127.0.0.1:8080"
//! upstream = "http://127.0.0.1:3000"
//! upstream_timeout = "60s"                   # optional: then 504
//! metrics = "127.0.0.1:9000"                 # optional: Prometheus metrics at /metrics
//! websockets = { max_per_key = 2, key = { client_ip = {} } }   # optional
//!
//! [policies.api]
//! rules = [{ name = "api", algorithm = "gcra", limit = 10, period = "1s", burst = 20 }]
//!
//! [routes.api]
//! paths = ["/api/"]
//! policy = "api"
//! key = { header = "x-api-key" }
//! ```
//!
//! - Request and response bodies stream through (nothing is buffered).
//! - The client's address is appended to `X-Forwarded-For` (created when absent), and a
//!   `Forwarded: for=...` element is appended (RFC 7239); `Host` is passed on as the client sent
//!   it. Hop-by-hop headers are not forwarded.
//! - Upstream answers, errors included, pass through unchanged; an upstream that cannot be
//!   reached is answered 502, one that does not start its answer within `upstream_timeout`
//!   (default 60 s) 504 (problem+json).
//! - Upgrades (WebSocket) pass through: the tunnel is copied both ways, and with `websockets`
//!   each key holds one slot of a concurrency limit for as long as its tunnel lives.
//! - SIGHUP reloads the file: new requests get the new limits, connections and tunnels that are
//!   open keep going, and stores whose settings did not change are kept with their counts and
//!   connections; a file that does not load is reported and the old limits kept. `listen`,
//!   `upstream`, `upstream_timeout` and `metrics` changes need a restart.
//! - SIGTERM or Ctrl-C: stop accepting, finish what is in flight, exit.
//!
//! The first line on stdout says where it listens, e.g.
//! `proxy: listening on http://127.0.0.1:8080, upstream http://127.0.0.1:3000, 1 routes, 0
//! concurrency limits`.

mod config;
mod forward;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

use crate::config::Loaded;
use crate::forward::Forward;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Proxied = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// The services of one configuration: the upstream, behind each request's limits.
struct Routes {
    loaded: Loaded,
    upstream: Proxied,
}

impl Routes {
    fn new(loaded: Loaded, forward: &Forward) -> Self {
        Self {
            loaded,
            upstream: Proxied::new(forward.clone()),
        }
    }

    /// The service for `request`: the upstream behind the WebSocket limit for an upgrade, its
    /// path's concurrency limit, and its path's rate limit, outermost (refusing is cheapest
    /// there). Layering is a few reference counts and a box per request.
    ///
    /// The WebSocket limit is innermost so that its permit is the one the request carries to
    /// [`Forward`], which holds it for the tunnel's life (the request extensions keep one
    /// permit, the last inserted); a path's concurrency slot ends with the `101` answer.
    fn service(&self, request: &Request<Body>) -> Proxied {
        let path = request.uri().path();
        let limits = &self.loaded.limits;
        let mut service = self.upstream.clone();
        if let Some(limit) = &self.loaded.websockets
            && forward::is_upgrade(request)
        {
            service = limited(limit, service);
        }
        if let Some((_, limit)) = limits.concurrency_for(path) {
            service = limited(limit, service);
        }
        if let Some((_, layer)) = limits.route_for(path) {
            service = limited(layer, service);
        }
        service
    }
}

/// `service` behind `layer`, boxed again.
fn limited<L, B>(layer: &L, service: Proxied) -> Proxied
where
    L: Layer<Proxied>,
    L::Service: tower::Service<Request<Body>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<Request<Body>>>::Future: Send + 'static,
    B: http_body::Body<Data = axum::body::Bytes, Error: Into<BoxError>> + Send + 'static,
{
    Proxied::new(
        layer
            .layer(service)
            .map_response(|response| response.map(Body::new)),
    )
}

type Shared = Arc<RwLock<Arc<Routes>>>;

async fn proxy(State(shared): State<Shared>, request: Request<Body>) -> Response<Body> {
    let service = shared
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .service(&request);
    match service.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn main() -> Result<(), BoxError> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: proxy CONFIG_FILE (a TOML file: see the example's documentation)")?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colours for a terminal only: escape codes in a log file or a pipe are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(path))
}

async fn run(path: String) -> Result<(), BoxError> {
    let loaded = config::load(&path, None).map_err(|err| format!("{path}: {err}"))?;
    let (listen, upstream) = (loaded.listen, loaded.upstream.clone());
    if let Some(metrics) = loaded.metrics {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(metrics)
            .install()?;
    }
    let forward = Forward::new(&upstream, loaded.upstream_timeout)?;
    let routes = loaded.limits.layers().count();
    let concurrency = loaded.limits.concurrency_layers().count();
    let shared: Shared = Arc::new(RwLock::new(Arc::new(Routes::new(loaded, &forward))));
    tokio::spawn(reload_on_hangup(path, shared.clone(), forward));

    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!(
        "proxy: listening on http://{}, upstream {upstream}, {routes} routes, {concurrency} concurrency limits",
        listener.local_addr()?
    );
    let app = Router::new().fallback(proxy).with_state(shared);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown())
    .await?;
    Ok(())
}

/// Reloads the limits on every SIGHUP; a file that fails to load leaves the running limits.
async fn reload_on_hangup(path: String, shared: Shared, forward: Forward) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            return;
        };
        while hangups.recv().await.is_some() {
            let current = shared
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            match config::load(&path, Some(&current.loaded.limits)) {
                Ok(loaded) => {
                    let routes = Arc::new(Routes::new(loaded, &forward));
                    *shared
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = routes;
                    tracing::info!(path, "configuration reloaded");
                }
                Err(err) => {
                    tracing::error!(path, error = %err, "configuration not reloaded, the old one stays");
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, shared, forward);
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing the requests in flight");
}
