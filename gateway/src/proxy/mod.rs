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

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use tower::ServiceExt;
use tower_redis_ratelimit::store::redact_url;

use self::forward::{Forward, Forwarded};
pub use self::load::{DEFAULT_UPSTREAM_TIMEOUT, Loaded, load};
use self::routes::Routes;
use crate::config::{File, LogFormat};
use crate::reset;
use crate::runtime::{
    self, AccessLog, Address, Admin, BoxError, Entry, Hangups, Listener, Reloadable, Shutdown,
    ShutdownTrigger, Workers, X_REQUEST_ID, count_request, logs, normalised, request_id, tls,
};

/// The routes in force, replaced whole on a reload.
type Shared = Arc<Reloadable<Routes>>;

/// A proxy, bound and ready to serve.
pub struct Proxy {
    path: PathBuf,
    hangups: Hangups,
    shared: Shared,
    /// What clients speak to it (`http` or `https`), told to the upstream.
    proto: &'static str,
    listener: Listener,
    workers: Workers,
    admin: Option<Admin>,
    log: AccessLog,
    shutdown: Shutdown,
}

impl Proxy {
    /// Loads the file at `path`, builds its limits and binds its listeners (the admin address
    /// too, with the process's Prometheus recorder installed). `shutdown` says when to drain,
    /// and when the drain is over (open tunnels are then closed).
    pub async fn bind(path: impl Into<PathBuf>, shutdown: Shutdown) -> Result<Proxy, BoxError> {
        let path = path.into();
        let hangups = Hangups::hear();
        let file = File::read(&path)?;
        let loaded = load(&file, None)?;
        let tls = loaded.tls.is_some();
        let proto = if tls { "https" } else { "http" };
        let mut listener = Listener::tcp(loaded.table.listen).await?;
        let workers = Workers::start(loaded.connections.workers)?;
        let admin = Admin::bind(loaded.table.admin, loaded.admin_access.clone()).await?;
        let log = AccessLog::new(loaded.table.access_log);
        let forward = Forward::new(&loaded, proto, shutdown.clone());
        let shared = Reloadable::new(Routes::new(loaded, &forward));
        if tls {
            // Each handshake serves the certificate of the file in force: a reload rotates it.
            let in_force = Arc::clone(&shared);
            listener = listener.with_tls(tls::acceptor(move || {
                in_force.current().loaded.tls.clone()
            })?);
        }
        Ok(Proxy {
            path,
            hangups,
            shared,
            proto,
            listener,
            workers,
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
        self.admin.as_ref().map(Admin::address)
    }

    /// The line printed at start: where it listens and what it forwards to.
    pub fn describe(&self) -> std::io::Result<String> {
        let routes = self.shared.current();
        let loaded = &routes.loaded;
        let mut line = format!(
            "proxy: listening on {}, upstream {}, {} routes, {} concurrency limits",
            self.address()?,
            redact_url(&loaded.table.upstream),
            loaded.limits.layers().count(),
            loaded.limits.concurrency_layers().count(),
        );
        if let Some(admin) = self.admin_address() {
            line.push_str(&format!(", admin on {}", admin?));
        }
        Ok(line)
    }

    /// The drain delay and timeout of the file's `[proxy.connections]`.
    pub fn drain(&self) -> (std::time::Duration, std::time::Duration) {
        let connections = self.shared.current().loaded.connections;
        (connections.drain_delay, connections.drain_timeout)
    }

    /// Serves until the drain is over; reloads the file on SIGHUP meanwhile.
    pub async fn run(self) {
        let Proxy {
            path,
            hangups,
            shared,
            proto,
            listener,
            workers,
            admin,
            log,
            shutdown,
        } = self;
        let connections = shared.current().loaded.connections;
        let forwarding = shutdown.clone();
        tokio::spawn(
            Arc::clone(&shared).reload_on_hangup(hangups, path, move |file, previous| {
                let mut loaded = load(file, Some(&previous.loaded.limits))?;
                // Whether the listener speaks TLS is decided at start: a file without `tls`
                // keeps the certificate served (the reload says `proxy.tls` is not applied).
                if loaded.tls.is_none() {
                    loaded.tls.clone_from(&previous.loaded.tls);
                }
                let forward = Forward::new(&loaded, proto, forwarding.clone());
                Ok(Routes::new(loaded, &forward))
            }),
        );
        let admin = admin.map(|admin| {
            // The proxy has no Envoy files: a descriptor is answered as unknown.
            let resetter = shared.resetter(|routes: Arc<Routes>, target| async move {
                reset::reset(&routes.loaded.limits, None, target).await
            });
            admin.spawn(
                shared.readiness(|routes| &routes.loaded.limits),
                resetter,
                shutdown.clone(),
            )
        });
        let handler = move |request: Request<Incoming>| {
            let (shared, log) = (Arc::clone(&shared), log.clone());
            async move { handle(&shared, &log, request).await }
        };
        runtime::serve_connections(listener, connections, workers, handler, shutdown).await;
        if let Some(admin) = admin {
            admin.abort();
        }
    }
}

/// Runs the proxy of the file at `path` until SIGTERM or Ctrl-C (and the drain after it),
/// saying where it listens first (on standard error, with the other messages: standard output
/// is the access log's).
pub async fn run(path: PathBuf) -> Result<(), BoxError> {
    let (trigger, shutdown) = ShutdownTrigger::new();
    // The messages' format is the file's: read it first, so that what binding says is
    // written in it too.
    let table = File::read(&path)?.tables.proxy;
    let format = table.map(|table| LogFormat::or_like(table.log_format, table.access_log));
    logs::init(format.unwrap_or(LogFormat::Text));
    let proxy = Proxy::bind(path, shutdown).await?;
    // Listening for SIGTERM before the start-up line: a supervisor may stop it at once.
    let (delay, timeout) = proxy.drain();
    trigger.on_signals(delay, timeout);
    tracing::info!("{}", proxy.describe()?);
    proxy.run().await;
    Ok(())
}

async fn handle(shared: &Shared, log: &AccessLog, request: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let mut request = request.map(Body::new);
    let id = request_id(request.headers_mut());
    let peer = request.extensions().get::<SocketAddr>().map(SocketAddr::ip);
    let method = request.method().clone();
    let mut logged_path = None;
    let routes = shared.current();
    let (mut response, route, key) = match normalised(request) {
        Ok(request) => {
            let stack = routes.stack(&request);
            let route = stack.routes();
            let (request, key) = match route {
                Some(_) if log.is_on() => stack.key(request),
                _ => (request, None),
            };
            if log.is_on() {
                logged_path = Some(request.uri().path().to_owned());
            }
            let response = match stack.service().oneshot(request).await {
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
    count_request(decision, response.status(), latency);
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
            delay: forwarded.map_or(std::time::Duration::ZERO, |forwarded| forwarded.waited),
            latency,
            upstream_status: forwarded.and_then(|forwarded| forwarded.upstream_status),
            envoy: None,
        });
    }
    response
}
