//! `ratelimit-gateway proxy CONFIG`: a rate-limiting reverse proxy. Requests of a route are
//! limited as the file says and refused with the crate's own answers; the others, and those
//! admitted, are forwarded to the upstream, their bodies streamed both ways.

mod forward;
mod frames;
mod headers;
mod load;
mod routes;
mod tunnel;
mod upload;
mod upstream;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use axum::body::Body;
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use tower::ServiceExt;

use self::forward::{Forward, Forwarded, problem, status_class};
pub use self::load::{DEFAULT_UPSTREAM_TIMEOUT, Loaded, load};
use self::routes::Routes;
use crate::config::File;
use crate::paths::normalise;
use crate::server::{
    self, AccessLog, Address, BoxError, Entry, Listener, Readiness, Shutdown, ShutdownTrigger,
    X_REQUEST_ID, request_id,
};

/// The routes in force, replaced whole on a reload.
type Shared = Arc<RwLock<Arc<Routes>>>;

/// A proxy, bound and ready to serve.
pub struct Proxy {
    path: PathBuf,
    shared: Shared,
    forward: Forward,
    listener: Listener,
    admin: Option<(Listener, metrics_exporter_prometheus::PrometheusHandle)>,
    log: AccessLog,
    shutdown: Shutdown,
}

impl Proxy {
    /// Loads the file at `path`, builds its limits and binds its listeners (the admin address
    /// too, with the process's Prometheus recorder installed). `shutdown` says when to drain,
    /// and when the drain is over (open tunnels are then closed).
    pub async fn bind(path: impl Into<PathBuf>, shutdown: Shutdown) -> Result<Proxy, BoxError> {
        let path = path.into();
        let file = File::read(&path)?;
        let loaded = load(&file, None)?;
        let mut listener = Listener::tcp(loaded.table.listen).await?;
        if let Some(tls) = &loaded.tls {
            listener = listener.with_tls(tls.clone());
        }
        let proto = if listener.is_tls() { "https" } else { "http" };
        let forward = Forward::new(
            loaded.upstream.clone(),
            loaded.upstream_timeout,
            loaded.table.max_body_size.unwrap_or(u64::MAX),
            proto,
            shutdown.clone(),
        );
        let admin = match loaded.table.admin {
            Some(addr) => Some((Listener::tcp(addr).await?, server::install_metrics()?)),
            None => None,
        };
        let log = AccessLog::new(loaded.table.access_log);
        let shared = Arc::new(RwLock::new(Arc::new(Routes::new(loaded, &forward))));
        Ok(Proxy {
            path,
            shared,
            forward,
            listener,
            admin,
            log,
            shutdown,
        })
    }

    /// Where clients connect.
    pub fn address(&self) -> std::io::Result<Address> {
        self.listener.address()
    }

    /// Where the admin endpoints are, if the file names an address.
    pub fn admin_address(&self) -> Option<std::io::Result<Address>> {
        self.admin.as_ref().map(|(listener, _)| listener.address())
    }

    /// The line printed at start: where it listens and what it forwards to.
    pub fn describe(&self) -> std::io::Result<String> {
        let routes = current(&self.shared);
        let loaded = &routes.loaded;
        let mut line = format!(
            "proxy: listening on {}, upstream {}, {} routes, {} concurrency limits",
            self.address()?,
            loaded.table.upstream,
            loaded.limits.layers().count(),
            loaded.limits.concurrency_layers().count(),
        );
        if let Some(admin) = self.admin_address() {
            line.push_str(&format!(", admin on {}", admin?));
        }
        Ok(line)
    }

    /// The drain timeout of the file's `[proxy.connections]`.
    pub fn drain_timeout(&self) -> std::time::Duration {
        current(&self.shared).loaded.connections.drain_timeout
    }

    /// Serves until the drain is over; reloads the file on SIGHUP meanwhile.
    pub async fn run(self) {
        let Proxy {
            path,
            shared,
            forward,
            listener,
            admin,
            log,
            shutdown,
        } = self;
        let connections = current(&shared).loaded.connections;
        tokio::spawn(reload_on_hangup(path, Arc::clone(&shared), forward));
        if let Some((listener, metrics)) = admin {
            tokio::spawn(server::serve_admin(
                listener,
                metrics,
                readiness(&shared),
                shutdown.clone(),
            ));
        }
        let handler = move |request: Request<Incoming>| {
            let (shared, log) = (Arc::clone(&shared), log.clone());
            async move { handle(&shared, &log, request).await }
        };
        server::serve(listener, connections, handler, shutdown).await;
    }
}

/// Runs the proxy of the file at `path` until SIGTERM or Ctrl-C (and the drain after it),
/// printing where it listens on standard output first.
pub async fn run(path: PathBuf) -> Result<(), BoxError> {
    let (trigger, shutdown) = ShutdownTrigger::new();
    let proxy = Proxy::bind(path, shutdown).await?;
    println!("{}", proxy.describe()?);
    trigger.on_signals(proxy.drain_timeout());
    proxy.run().await;
    Ok(())
}

fn current(shared: &Shared) -> Arc<Routes> {
    Arc::clone(
        &shared
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// `/readyz`: the configuration is loaded (it is, once running), and every store answers.
fn readiness(shared: &Shared) -> Readiness {
    let shared = Arc::clone(shared);
    Arc::new(move || {
        let routes = current(&shared);
        Box::pin(async move {
            let failed: Vec<String> = routes
                .loaded
                .limits
                .ping_stores()
                .await
                .into_iter()
                .filter_map(|(name, answer)| answer.err().map(|err| format!("store {name}: {err}")))
                .collect();
            if failed.is_empty() {
                Ok(())
            } else {
                Err(failed.join("; "))
            }
        })
    })
}

async fn handle(shared: &Shared, log: &AccessLog, request: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let mut request = request.map(Body::new);
    let id = request_id(request.headers_mut());
    let peer = request.extensions().get::<SocketAddr>().map(SocketAddr::ip);
    let method = request.method().clone();
    let mut logged_path = None;
    let routes = current(shared);
    let (mut response, route, key) = match normalised(request) {
        Ok(request) => {
            let (service, route) = routes.service(&request);
            let (request, key) = match route {
                Some(route) if log.is_on() => routes.key(route, request),
                _ => (request, None),
            };
            if log.is_on() {
                logged_path = Some(request.uri().path().to_owned());
            }
            let response = match service.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            (response, route, key)
        }
        Err(response) => (*response, None, None),
    };
    response.headers_mut().insert(X_REQUEST_ID, id.clone());
    let forwarded = response.extensions().get::<Forwarded>().copied();
    let decision = match (route, forwarded) {
        (None, _) => "unlimited",
        (Some(_), Some(Forwarded { decided: true, .. })) => "allowed",
        (Some(_), Some(Forwarded { decided: false, .. })) => "skipped",
        (Some(_), None) => "denied",
    };
    let latency = started.elapsed();
    metrics::counter!(
        "gateway_requests_total",
        "decision" => decision,
        "status" => status_class(response.status()),
    )
    .increment(1);
    metrics::histogram!("gateway_request_duration_seconds").record(latency.as_secs_f64());
    if log.is_on() {
        let key = key.map(|key| log.key_digest(&key));
        log.record(&Entry {
            request_id: id.to_str().unwrap_or("-"),
            peer,
            method: &method,
            // A path refused as ambiguous is not logged: it may hold anything.
            path: logged_path.as_deref().unwrap_or("-"),
            status: response.status().as_u16(),
            route,
            key: key.as_deref(),
            decision,
            latency,
            upstream_status: forwarded.and_then(|forwarded| forwarded.upstream_status),
        });
    }
    response
}

/// `request` with its path normalised, or the 400 answer to a path that cannot be.
fn normalised(mut request: Request<Body>) -> Result<Request<Body>, Box<Response<Body>>> {
    match normalise(request.uri().path()) {
        Ok(Cow::Borrowed(_)) => Ok(request),
        Ok(Cow::Owned(path)) => match with_path(request.uri(), &path) {
            // Forwarded as matched: the upstream serves what was limited.
            Some(uri) => {
                *request.uri_mut() = uri;
                Ok(request)
            }
            None => Err(Box::new(problem(
                StatusCode::BAD_REQUEST,
                "The request's target cannot be forwarded.",
            ))),
        },
        Err(err) => Err(Box::new(problem(
            StatusCode::BAD_REQUEST,
            &format!("{err}."),
        ))),
    }
}

/// `uri` with its path replaced by `path` (its query kept).
fn with_path(uri: &Uri, path: &str) -> Option<Uri> {
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    Uri::from_parts(parts).ok()
}

/// Reloads the limits on every SIGHUP; a file that fails to load leaves the running limits.
async fn reload_on_hangup(path: PathBuf, shared: Shared, forward: Forward) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            return;
        };
        while hangups.recv().await.is_some() {
            let previous = current(&shared);
            let loaded =
                File::read(&path).and_then(|file| load(&file, Some(&previous.loaded.limits)));
            match loaded {
                Ok(loaded) => {
                    let routes = Arc::new(Routes::new(loaded, &forward));
                    *shared
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = routes;
                    tracing::info!(path = %path.display(), "configuration reloaded");
                }
                Err(err) => {
                    tracing::error!(error = %err, "configuration not reloaded, the old one stays");
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, shared, forward);
}
