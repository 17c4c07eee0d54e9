//! `ratelimit-gateway serve CONFIG`: the decision service for gateways. nginx (`auth_request`),
//! Traefik (ForwardAuth) and Caddy (`forward_auth`) ask it whether a request may pass, before
//! they serve it; it answers with the routes, keys, policies, plans and headers of the file,
//! as `proxy` would decide, and never sees the request's body nor the upstream.
//!
//! - `/auth_request` ([`Endpoint::AuthRequest`]) and `/forward_auth`
//!   ([`Endpoint::ForwardAuth`]), on a TCP address, a Unix domain socket, or both.
//! - The request asked about is named by the gateway: `X-Original-URI` (at `/auth_request`) or
//!   `X-Forwarded-Uri` (at `/forward_auth`), `X-Forwarded-Method`, and its headers passed on; its client by a trusted gateway
//!   (`[serve] gateways`) in `X-Forwarded-For` or `client_header`.

mod admitted;
mod client;
mod endpoints;
mod load;
mod original;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tower::ServiceExt;

use self::admitted::Admitted;
pub use self::endpoints::{Endpoint, REJECTION_STATUS};
pub use self::load::{Loaded, load};
pub use self::original::{X_FORWARDED_METHOD, X_FORWARDED_URI, X_ORIGINAL_URI};
use crate::config::{File, LogFormat};
use crate::envoy;
use crate::reset;
use crate::runtime::{
    self, AccessLog, Address, Admin, BoxError, Connections, Entry, EnvoyQuestion, Hangups,
    Listener, Reloadable, Shutdown, ShutdownTrigger, Workers, X_REQUEST_ID, count_request, logs,
    problem, request_id, tls,
};

/// What a request needs: the limits in force with their services (replaced on a reload), and
/// the log.
#[derive(Clone)]
struct State {
    loaded: Arc<Reloadable<Loaded>>,
    log: AccessLog,
}

/// The decision service, bound and ready to answer.
pub struct Serve {
    path: PathBuf,
    hangups: Hangups,
    state: State,
    listeners: Vec<Listener>,
    /// Shared by the listeners: one worker per core, whichever listener a question comes in on.
    workers: Workers,
    admin: Option<Admin>,
    shutdown: Shutdown,
}

impl Serve {
    /// Loads the file at `path`, builds its limits and binds its listeners (the admin address
    /// too, with the process's Prometheus recorder installed). `shutdown` says when to drain.
    pub async fn bind(path: impl Into<PathBuf>, shutdown: Shutdown) -> Result<Serve, BoxError> {
        let path = path.into();
        let hangups = Hangups::hear();
        let file = File::read(&path)?;
        let loaded = load(&file, None)?;
        let mut tcp = match loaded.table.listen {
            Some(addr) => Some(Listener::tcp(addr).await?),
            None => None,
        };
        #[cfg(unix)]
        let unix = match &loaded.table.socket {
            Some(socket) => Some(Listener::unix(socket)?),
            None => None,
        };
        #[cfg(not(unix))]
        let unix = match loaded.table.socket {
            Some(_) => return Err("`serve.socket`: Unix domain sockets need a Unix system".into()),
            None => None,
        };
        let tls = loaded.tls.is_some();
        let workers = Workers::start(loaded.connections.workers)?;
        let admin = Admin::bind(loaded.table.admin, loaded.admin_access.clone()).await?;
        if let Some(envoy) = &loaded.envoy {
            envoy.export_metrics();
        }
        if let Some(quota) = &loaded.quota {
            quota.export_metrics();
        }
        let log = AccessLog::new(loaded.table.access_log);
        let state = State {
            loaded: Reloadable::new(loaded),
            log,
        };
        if tls {
            // Each handshake serves the certificate of the file in force: a reload rotates it.
            let in_force = Arc::clone(&state.loaded);
            let acceptor = tls::acceptor(move || in_force.current().tls.clone())?;
            tcp = tcp.map(|listener| listener.with_tls(acceptor));
        }
        let listeners = tcp.into_iter().chain(unix).collect();
        Ok(Serve {
            path,
            hangups,
            state,
            listeners,
            workers,
            admin,
            shutdown,
        })
    }

    /// Where gateways ask: the TCP address first, then the Unix socket, as configured.
    pub fn addresses(&self) -> std::io::Result<Vec<Address>> {
        self.listeners.iter().map(Listener::address).collect()
    }

    /// Where the admin endpoints are, if the file names an address.
    pub fn admin_address(&self) -> Option<std::io::Result<Address>> {
        self.admin.as_ref().map(Admin::address)
    }

    /// The line printed at start: where it listens and what it decides.
    pub fn describe(&self) -> std::io::Result<String> {
        let addresses: Vec<String> = self.addresses()?.iter().map(ToString::to_string).collect();
        let mut line = format!(
            "serve: listening on {}, {} routes{}",
            addresses.join(" and "),
            self.state.loaded.current().limits.layers().count(),
            match &self.state.loaded.current().envoy {
                Some(envoy) => format!(", envoy: {} domains", envoy.domains().len()),
                None => String::new(),
            },
        );
        if let Some(admin) = self.admin_address() {
            line.push_str(&format!(", admin on {}", admin?));
        }
        Ok(line)
    }

    /// The drain delay and timeout of the file's `[serve.connections]`.
    pub fn drain(&self) -> (std::time::Duration, std::time::Duration) {
        let connections = self.state.loaded.current().connections;
        (connections.drain_delay, connections.drain_timeout)
    }

    /// Answers until the drain is over; reloads the file on SIGHUP meanwhile, and when the
    /// files of `[serve.envoy] files` change (the stores whose settings did not change are
    /// kept, with their counts).
    pub async fn run(self) {
        let Serve {
            path,
            hangups,
            state,
            listeners,
            workers,
            admin,
            shutdown,
        } = self;
        let shared = Arc::clone(&state.loaded);
        // Envoy's and gRPC's clients ask here, and the authority routes nothing: any is taken
        // (grpcio sends a Unix socket's path).
        let connections = Connections {
            any_authority: true,
            ..shared.current().connections
        };
        if let Some(quota) = &shared.current().quota {
            quota.close_on_drain(shutdown.clone());
        }
        let hangup_path = path.clone();
        let reload = |file: &File, previous: &Loaded| {
            let mut loaded = load(file, Some(&previous.limits))?;
            // Whether the listener speaks TLS is decided at start: a file without `tls` keeps
            // the certificate served (the reload says `serve.tls` is not applied).
            if loaded.tls.is_none() {
                loaded.tls.clone_from(&previous.tls);
            }
            // The quota service's streams and shares outlive a reload: the running one takes
            // the new rules.
            if let (Some(running), Some(reloaded)) = (&previous.quota, &loaded.quota) {
                loaded.quota = Some(running.reload_from(reloaded));
            }
            Ok(loaded)
        };
        // envoyproxy/ratelimit's files reload when they change, as the reference's do.
        let (watched, reloaded) = (Arc::clone(&shared), Arc::clone(&shared));
        tokio::spawn(envoy::watch::on_change(
            move || {
                let current = watched.current();
                let table = current.table.envoy.as_ref()?;
                Some(table.files.clone())
            },
            move || reloaded.reload(&path, &reload),
        ));
        tokio::spawn(Arc::clone(&shared).reload_on_hangup(hangups, hangup_path, reload));
        let admin = admin.map(|admin| {
            let resetter = shared.resetter(|loaded: Arc<Loaded>, target| async move {
                reset::reset(&loaded.limits, loaded.envoy.as_ref(), target).await
            });
            admin.spawn(
                shared.readiness(|loaded| &loaded.limits),
                resetter,
                shutdown.clone(),
            )
        });
        let servers = listeners.into_iter().map(|listener| {
            let state = state.clone();
            let handler = move |request: Request<Incoming>| {
                let state = state.clone();
                async move { answer(&state, request).await }
            };
            tokio::spawn(runtime::serve_connections(
                listener,
                connections,
                workers.clone(),
                handler,
                shutdown.clone(),
            ))
        });
        for server in servers.collect::<Vec<_>>() {
            let _ = server.await;
        }
        if let Some(admin) = admin {
            admin.abort();
        }
    }
}

/// Runs the decision service of the file at `path` until SIGTERM or Ctrl-C (and the drain
/// after it), saying where it listens first (on standard error, with the other messages: standard output
/// is the access log's).
pub async fn run(path: PathBuf) -> Result<(), BoxError> {
    let (trigger, shutdown) = ShutdownTrigger::new();
    // The messages' format is the file's: read it first, so that what binding says is
    // written in it too.
    let table = File::read(&path)?.tables.serve;
    let format = table.map(|table| LogFormat::or_like(table.log_format, table.access_log));
    logs::init(format.unwrap_or(LogFormat::Text));
    let serve = Serve::bind(path, shutdown).await?;
    // Listening for SIGTERM before the start-up line: a supervisor may stop it at once.
    let (delay, timeout) = serve.drain();
    trigger.on_signals(delay, timeout);
    tracing::info!("{}", serve.describe()?);
    serve.run().await;
    Ok(())
}

/// The answer to a gateway's question, logged and counted.
async fn answer(state: &State, mut question: Request<Incoming>) -> Response<Body> {
    let loaded = state.loaded.current();
    let started = Instant::now();
    let id = request_id(question.headers_mut());
    // Envoy's gRPC on the same listeners: its own metrics, and an access log line of its own.
    if let Some(envoy) = &loaded.envoy
        && question.uri().path().starts_with(envoy::PATH_PREFIX)
    {
        let path = question.uri().path().to_owned();
        let answer = envoy.call(question).await.map(Body::new);
        record_envoy(&state.log, &id, &path, &answer, started.elapsed());
        return answer;
    }
    // Envoy's quota service: one stream per Envoy for as long as it runs, not a question
    // with an answer, so it has no access log line.
    if let Some(quota) = &loaded.quota
        && question
            .uri()
            .path()
            .starts_with(envoy::quota::QUOTA_PATH_PREFIX)
    {
        return match quota.grpc().oneshot(question).await {
            Ok(answer) => answer.map(Body::new),
            Err(never) => match never {},
        };
    }
    // The question's own method until it names the request's; no path until then.
    let mut asked = Asked {
        method: question.method().clone(),
        path: None,
        client: None,
        key: None,
    };
    let endpoint = Endpoint::at(question.uri().path());
    let (answer, route) = match endpoint {
        None => (
            problem(
                StatusCode::NOT_FOUND,
                "Ask at /auth_request (nginx) or /forward_auth (Traefik, Caddy).",
            ),
            None,
        ),
        Some(endpoint) => {
            match original::original(question, &endpoint.target(), &loaded.gateways) {
                Ok(request) => ask(&loaded, &state.log, request, &mut asked).await,
                Err(refused) => (*refused, None),
            }
        }
    };
    let admitted = answer.extensions().get::<Admitted>().copied();
    let decision = match (route, admitted) {
        (None, _) => "unlimited",
        (Some(_), Some(Admitted { decided: true, .. })) => "allowed",
        (Some(_), Some(Admitted { decided: false, .. })) => "skipped",
        (Some(_), None) => "denied",
    };
    let mut response = match endpoint {
        Some(endpoint) => endpoint.shape(answer),
        None => answer,
    };
    response.headers_mut().insert(X_REQUEST_ID, id.clone());
    let latency = started.elapsed();
    count_request(decision, response.status(), latency);
    let log = &state.log;
    if log.is_on() {
        let key = asked.key.map(|key| log.key_digest(&key));
        log.record(&Entry {
            request_id: id.to_str().unwrap_or("-"),
            peer: asked.client,
            method: &asked.method,
            // A question refused before its target was read names no path: it may hold anything.
            path: asked.path.as_deref().unwrap_or("-"),
            status: response.status().as_u16(),
            route,
            key: key.as_deref(),
            decision,
            delay: admitted.map_or(std::time::Duration::ZERO, |admitted| admitted.waited),
            latency,
            upstream_status: None,
            envoy: None,
        });
    }
    response
}

/// The access log's line of an Envoy question: its domain, descriptors and overall code; a
/// question refused with a gRPC error (no domain, too many descriptors) has none of them, and
/// its decision is `error`.
fn record_envoy(
    log: &AccessLog,
    id: &http::HeaderValue,
    path: &str,
    answer: &Response<Body>,
    latency: std::time::Duration,
) {
    if !log.is_on() {
        return;
    }
    let asked = answer.extensions().get::<envoy::Asked>();
    let decision = match asked.map(|asked| asked.code) {
        Some("OK") => "allowed",
        Some("OVER_LIMIT") => "denied",
        Some(_) => "unknown",
        None => "error",
    };
    log.record(&Entry {
        request_id: id.to_str().unwrap_or("-"),
        peer: None,
        method: &Method::POST,
        path,
        status: answer.status().as_u16(),
        route: None,
        key: None,
        decision,
        delay: std::time::Duration::ZERO,
        latency,
        upstream_status: None,
        envoy: asked.map(|asked| EnvoyQuestion {
            domain: &asked.domain,
            descriptors: asked.descriptors,
            code: asked.code,
        }),
    });
}

/// What the access log says of the request a question is about.
struct Asked {
    method: Method,
    /// Its normalised path, without the query.
    path: Option<String>,
    client: Option<IpAddr>,
    /// Its route's key, if it has both.
    key: Option<Vec<u8>>,
}

/// The limits' answer about `request`, and its routes' names; what the log needs noted in
/// `asked` (only when it is on).
async fn ask<'a>(
    loaded: &'a Loaded,
    log: &AccessLog,
    request: Request<Body>,
    asked: &mut Asked,
) -> (Response<Body>, Option<&'a str>) {
    let stack = loaded.paths.for_path(request.uri().path());
    let mut request = request;
    if log.is_on() {
        asked.method = request.method().clone();
        asked.path = Some(request.uri().path().to_owned());
        asked.client = request.extensions().get::<SocketAddr>().map(SocketAddr::ip);
        (request, asked.key) = stack.key(request);
    }
    let answer = match stack.service().oneshot(request).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    (answer, stack.routes())
}
