//! A Redis that stops answering without closing its connections: a frozen process (SIGSTOP),
//! `CLIENT PAUSE`, and a connection silenced by a proxy (a partition). Requests must be answered within the layer's deadline (failing open or closed
//! as configured), and limiting must resume once Redis answers again.
//!
//! Multi-thread runtimes: `redis-cli` and the process signals block the calling thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, header, text, timed_get};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{Quota, RateLimitLayer, RedisStore, Rule};

const PEER: &str = "198.51.100.4:5000";
const DEADLINE: Duration = Duration::from_millis(100);
/// What a request of these tests may take while Redis is frozen: below the 2 s after which the
/// store gives up on a silent connection, so an answer within it came from the deadline (whose
/// precision `admission::deadline`'s tests show in virtual time) and not from the connection
/// giving up; ten times the deadline, so that a busy machine's scheduling delays do not fail it.
const ANSWERED_BY_THE_DEADLINE: Duration = Duration::from_secs(1);
/// How long Redis may take to be used again once it answers (reconnect backoff is at most 1 s,
/// connect timeout 1 s).
const RECOVERY: Duration = Duration::from_secs(8);

fn app(redis: &RedisServer, failure: FailureMode) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(Rule::gcra("frozen", Quota::per_hour(3)))
        .key(HeaderKey::new("x-client"))
        .store(RedisStore::open(&redis.url()).unwrap())
        .failure_mode(failure)
        .deadline(DEADLINE)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

async fn send(app: &Router, client: &str) -> (Response<Body>, Duration) {
    timed_get(app, "/", PEER, &[("x-client", client)]).await
}

/// Checks one request that Redis could not answer: within the deadline plus slack, and failed
/// open (200, `Skipped`, the service ran) or closed (503 with `Retry-After`, problem+json); either
/// way with the layer's static `RateLimit-Policy` and no `RateLimit`, which needs a decision.
async fn assert_failed_in_time(
    failure: FailureMode,
    (response, took): (Response<Body>, Duration),
    what: &str,
) {
    assert!(
        took < ANSWERED_BY_THE_DEADLINE,
        "{what} took {took:?} (deadline {DEADLINE:?})"
    );
    assert_eq!(
        header(&response, "ratelimit-policy"),
        r#""frozen";q=3;w=3600"#,
        "{what}"
    );
    assert_eq!(header(&response, "ratelimit"), "", "{what}");
    match failure {
        FailureMode::Closed => {
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{what}");
            let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
            assert!(retry_after >= 1);
            assert_eq!(
                header(&response, "content-type"),
                "application/problem+json"
            );
        }
        _ => {
            assert_eq!(response.status(), StatusCode::OK, "{what}");
            assert_eq!(
                header(&response, "rate-limiting-state"),
                "Skipped",
                "{what}"
            );
            assert_eq!(text(response).await, "ok");
        }
    }
}

/// Sends requests until Redis decides one again (`Allow`, or `Deny`: requests that timed out
/// while Redis was stalled still reach it and may have used up `client`'s quota), for at most
/// [`RECOVERY`].
async fn wait_until_counted(app: &Router, client: &str) {
    let started = Instant::now();
    loop {
        let (response, _) = send(app, client).await;
        if matches!(
            header(&response, "rate-limiting-state").as_str(),
            "Allow" | "Deny"
        ) {
            return;
        }
        assert!(
            started.elapsed() < RECOVERY,
            "limiting did not resume within {RECOVERY:?} (last answer: {})",
            response.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A fresh client gets exactly its quota of 3, then a 429.
async fn assert_enforced(app: &Router, client: &str) {
    for used in 1..=3 {
        let (response, _) = send(app, client).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "request {used} of {client}"
        );
        assert_eq!(header(&response, "rate-limiting-state"), "Allow");
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string()
        );
    }
    let (response, _) = send(app, client).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&response, "rate-limiting-state"), "Deny");
}

/// Freezes Redis for long enough that the store also gives up on the silent connection (2 s by
/// default) and tries to reconnect to the frozen server; every request, sequential or concurrent,
/// is still answered within the deadline. After SIGCONT, limiting resumes.
async fn frozen_redis(failure: FailureMode) {
    let redis = RedisServer::start();
    let app = app(&redis, failure);
    assert_enforced(&app, "warm-up").await;

    redis.freeze();
    let frozen = Instant::now();
    let mut sent = 0;
    while frozen.elapsed() < Duration::from_millis(2800) {
        let what = format!("request {sent} after {:?} frozen", frozen.elapsed());
        assert_failed_in_time(failure, send(&app, "alice").await, &what).await;
        sent += 1;
    }
    assert!(sent >= 5, "only {sent} requests in 2.8 s");
    let concurrent: Vec<_> = (0..20)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move { send(&app, &format!("client-{i}")).await })
        })
        .collect();
    for (i, request) in concurrent.into_iter().enumerate() {
        let what = format!("concurrent request {i}");
        assert_failed_in_time(failure, request.await.unwrap(), &what).await;
    }

    redis.thaw();
    wait_until_counted(&app, "probe").await;
    assert_enforced(&app, "after-thaw").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_fails_open_within_the_deadline() {
    frozen_redis(FailureMode::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_fails_closed_within_the_deadline() {
    frozen_redis(FailureMode::Closed).await;
}

/// `CLIENT PAUSE <ms> ALL`: the server is alive but holds every command. Requests during the
/// pause are answered within the deadline; when the pause ends, limiting resumes by itself.
async fn paused_redis(failure: FailureMode) {
    let redis = RedisServer::start();
    let app = app(&redis, failure);
    assert_enforced(&app, "warm-up").await;

    // Taken before the command, so the pause surely ends 3 s after this or later.
    let pausing = Instant::now();
    assert_eq!(redis.cli(&["CLIENT", "PAUSE", "3000", "ALL"]), "OK");
    let paused = Instant::now();
    let mut sent = 0;
    // Only the first second of the 3 s pause, so every request starts and ends inside it.
    while paused.elapsed() < Duration::from_secs(1) {
        let what = format!("request {sent} after {:?} paused", paused.elapsed());
        assert_failed_in_time(failure, send(&app, "bob").await, &what).await;
        sent += 1;
    }
    assert!(sent >= 3, "only {sent} requests in 1 s");

    wait_until_counted(&app, "probe").await;
    assert!(
        pausing.elapsed() >= Duration::from_millis(2950),
        "a request was counted {:?} into a 3 s pause",
        pausing.elapsed()
    );
    assert_enforced(&app, "after-pause").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_fails_open_within_the_deadline() {
    paused_redis(FailureMode::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_fails_closed_within_the_deadline() {
    paused_redis(FailureMode::Closed).await;
}

/// A TCP proxy in front of Redis that can make its current connections go silent (bytes are
/// swallowed in both directions, the sockets stay open): a network partition, as seen from the
/// client. Connections accepted later work normally.
struct SilencingProxy {
    port: u16,
    /// Connections numbered below this are silent.
    silent_below: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl SilencingProxy {
    async fn start(redis_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent_below = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (silent, count) = (silent_below.clone(), accepted.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let id = count.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(("127.0.0.1", redis_port)).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pipe(client_read, server_write, id, silent.clone()));
                tokio::spawn(pipe(server_read, client_write, id, silent.clone()));
            }
        });
        Self {
            port,
            silent_below,
            accepted,
            task,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Every connection made so far goes silent, for good.
    fn silence_existing(&self) {
        self.silent_below
            .store(self.accepted.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

impl Drop for SilencingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    id: usize,
    silent: Arc<AtomicUsize>,
) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                if id < silent.load(Ordering::SeqCst) {
                    continue;
                }
                if to.write_all(&buffer[..read]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A connection that stays open but never answers again (a partition; unlike SIGSTOP, it never
/// recovers): requests keep failing open within the deadline, and once the connection has been
/// silent for `stale_after` (2 s by default) the store replaces it and limiting resumes by
/// itself, over a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_replaced_and_limiting_resumes() {
    let redis = RedisServer::start();
    let proxy = SilencingProxy::start(redis.port()).await;
    let layer = RateLimitLayer::builder()
        .rule(Rule::gcra("frozen", Quota::per_hour(3)))
        .key(HeaderKey::new("x-client"))
        // No denial cache: a store that remembers nothing does not listen for resets, so the
        // proxy sees the decisions' connection alone.
        .store(
            RedisStore::builder(&proxy.url())
                .denial_cache(0)
                .build()
                .unwrap(),
        )
        .deadline(DEADLINE)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    assert_enforced(&app, "warm-up").await;
    assert_eq!(proxy.accepted.load(Ordering::SeqCst), 1);

    proxy.silence_existing();
    let silenced = Instant::now();
    let mut skipped = 0;
    loop {
        let (response, took) = send(&app, "alice").await;
        assert!(took < ANSWERED_BY_THE_DEADLINE, "a request took {took:?}");
        match header(&response, "rate-limiting-state").as_str() {
            "Skipped" => skipped += 1,
            "Allow" => break,
            other => panic!("unexpected state {other:?}"),
        }
        assert!(
            silenced.elapsed() < Duration::from_secs(2) + RECOVERY,
            "limiting did not resume over a new connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        silenced.elapsed() >= Duration::from_secs(2),
        "resumed after only {:?}: the silent connection cannot have answered",
        silenced.elapsed()
    );
    assert!(skipped > 0);
    assert!(
        proxy.accepted.load(Ordering::SeqCst) >= 2,
        "no new connection"
    );
    assert_enforced(&app, "after-partition").await;
}
