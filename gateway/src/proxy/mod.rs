//! `ratelimit-gateway proxy CONFIG`: a rate-limiting reverse proxy. Requests of a route are
//! limited as the file says and refused with the crate's own answers; the others, and those
//! admitted, are forwarded to the upstream, their bodies streamed both ways.

mod forward;
mod load;
mod routes;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use axum::body::Body;
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use tower::ServiceExt;

use self::forward::Forward;
pub use self::load::{DEFAULT_UPSTREAM_TIMEOUT, Loaded, load};
use self::routes::Routes;
use crate::config::File;
use crate::paths::normalise;
use crate::server::{self, Address, BoxError, Listener, Readiness, Shutdown, ShutdownTrigger};

/// The routes in force, replaced whole on a reload.
type Shared = Arc<RwLock<Arc<Routes>>>;

/// A proxy, bound and ready to serve.
pub struct Proxy {
    path: PathBuf,
    shared: Shared,
    forward: Forward,
    listener: Listener,
    admin: Option<(Listener, metrics_exporter_prometheus::PrometheusHandle)>,
}

impl Proxy {
    /// Loads the file at `path`, builds its limits and binds its listeners (the admin address
    /// too, with the process's Prometheus recorder installed).
    pub async fn bind(path: impl Into<PathBuf>) -> Result<Proxy, BoxError> {
        let path = path.into();
        let file = File::read(&path)?;
        let loaded = load(&file, None)?;
        let forward = Forward::new(&loaded.table.upstream, loaded.upstream_timeout)
            .map_err(|err| format!("{}: `proxy.upstream`: {err}", path.display()))?;
        let listener = Listener::tcp(loaded.table.listen).await?;
        let admin = match loaded.table.admin {
            Some(addr) => Some((Listener::tcp(addr).await?, server::install_metrics()?)),
            None => None,
        };
        let shared = Arc::new(RwLock::new(Arc::new(Routes::new(loaded, &forward))));
        Ok(Proxy {
            path,
            shared,
            forward,
            listener,
            admin,
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

    /// Serves until `shutdown` has drained; reloads the file on SIGHUP meanwhile.
    pub async fn run(self, shutdown: Shutdown) {
        let Proxy {
            path,
            shared,
            forward,
            listener,
            admin,
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
            let shared = Arc::clone(&shared);
            async move { handle(&shared, request).await }
        };
        server::serve(listener, connections, handler, shutdown).await;
    }
}

/// Runs the proxy of the file at `path` until SIGTERM or Ctrl-C, printing where it listens on
/// standard output first.
pub async fn run(path: PathBuf) -> Result<(), BoxError> {
    let proxy = Proxy::bind(path).await?;
    println!("{}", proxy.describe()?);
    let (trigger, shutdown) = ShutdownTrigger::new();
    let drain = current(&proxy.shared).loaded.connections.drain_timeout;
    trigger.on_signals(drain);
    proxy.run(shutdown).await;
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

async fn handle(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let mut request = request.map(Body::new);
    match normalise(request.uri().path()) {
        Ok(Cow::Borrowed(_)) => {}
        Ok(Cow::Owned(path)) => {
            // Forwarded as matched: the upstream serves what was limited.
            match with_path(request.uri(), &path) {
                Some(uri) => *request.uri_mut() = uri,
                None => {
                    return forward::problem(
                        StatusCode::BAD_REQUEST,
                        "The request's target cannot be forwarded.",
                    );
                }
            }
        }
        Err(err) => return forward::problem(StatusCode::BAD_REQUEST, &err.to_string()),
    }
    let service = current(shared).service(&request);
    match service.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
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
