//! The accept loop: at most so many connections, each served by hyper (HTTP/1.1, and HTTP/2 by
//! prior knowledge) on one of the workers, under its timers, upgrades allowed, drained on
//! shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::UPGRADE;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::sync::Semaphore;

use super::authority::AnyAuthority;
use super::in_flight::{Activity, InFlight, Timed, Tracked};
use super::listener::{Listener, Stream};
use super::shutdown::Shutdown;
use super::workers::Workers;
use super::{BoxError, Connections};

/// How long the accept loop pauses after an error such as "too many open files", rather than
/// spinning on it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long connections (tunnels) may take to close once the drain is cut.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Serves `handler` on `listener`, each connection on one of `workers`, until `shutdown` drains
/// it, then waits for the connections to finish their requests and tunnels, until the drain is
/// cut (and a short grace to close).
/// `handler` receives each request with the client's [`SocketAddr`] in its extensions (none on
/// a Unix socket), and an upgrade request also with an [`InFlight`] that keeps the connection's
/// timers off, and its slot among the `connections.max` taken, while the tunnel lives.
pub async fn serve_connections<H, F, B>(
    listener: Listener,
    connections: Connections,
    workers: Workers,
    handler: H,
    mut shutdown: Shutdown,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let slots = Arc::new(Semaphore::new(connections.max));
    let builder = Arc::new(builder());
    loop {
        let permit = tokio::select! {
            biased;
            _ = shutdown.draining() => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            _ = shutdown.draining() => break,
            accepted = listener.accept() => accepted,
        };
        let (accepted, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "cannot accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let activity = Arc::new(Activity::new(permit, connections.counted));
        let (builder, handler, shutdown) =
            (Arc::clone(&builder), handler.clone(), shutdown.clone());
        workers.spawn(async move {
            let accepted = match accepted.attach() {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, peer = %Peer(peer), "cannot take a connection on");
                    return;
                }
            };
            let handshake = tokio::time::timeout(connections.header_timeout, accepted.stream());
            let stream = match handshake.await {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    tracing::debug!(error = %err, peer = %Peer(peer), "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(peer = %Peer(peer), "TLS handshake timed out");
                    return;
                }
            };
            connection(
                &builder,
                stream,
                peer,
                activity,
                connections,
                handler,
                shutdown,
            )
            .await;
        });
    }
    drop(listener);
    // Every connection (and tunnel) holds a slot: all of them back means all closed.
    let all = u32::try_from(connections.max).unwrap_or(u32::MAX);
    tokio::select! {
        _ = slots.acquire_many(all) => {}
        () = async {
            shutdown.cut().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        } => {
            tracing::warn!(
                open = connections.max - slots.available_permits(),
                "connections still open after the drain deadline are dropped"
            );
        }
    }
}

fn builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // `Timed` keeps the header and idle timers: hyper's would run during idle time too.
        .header_read_timeout(None)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new());
    builder
}

async fn connection<H, F, B>(
    builder: &auto::Builder<TokioExecutor>,
    stream: Stream,
    peer: Option<SocketAddr>,
    activity: Arc<Activity>,
    settings: Connections,
    handler: H,
    mut shutdown: Shutdown,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let io = AnyAuthority::new(
        Timed::new(
            stream,
            Arc::clone(&activity),
            settings.header_timeout,
            settings.idle_timeout,
        ),
        settings.any_authority,
    );
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let in_flight = InFlight::new(&activity);
        if let Some(peer) = peer {
            request.extensions_mut().insert(peer);
        }
        if request.headers().contains_key(UPGRADE) {
            request.extensions_mut().insert(in_flight.clone());
        }
        let answer = handler(request);
        async move { Ok::<_, Infallible>(answer.await.map(|body| Tracked::new(body, in_flight))) }
    });
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = shutdown.draining() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = ended {
        tracing::debug!(error = %err, peer = %Peer(peer), "connection closed");
    }
}

/// A client's address in a message: the address, or `unix socket` where there is none.
struct Peer(Option<std::net::SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(peer) => peer.fmt(f),
            None => f.write_str("unix socket"),
        }
    }
}
