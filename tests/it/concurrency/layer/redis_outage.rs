//! `ConcurrencyLimitLayer` against a dead, frozen or paused Redis: failing open or closed within the
//! deadline, and no permit leaked by an acquisition that Redis admits after the request gave up.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{RELEASED_WITHIN, WS_POLICY, request};
use crate::support::{RedisServer, eventually, header};
use axum::body::Body;
use http::{Request, Response, StatusCode};
use tower::{ServiceExt, service_fn};
use tower_layer::Layer;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::store::StoreFuture;
use tower_redis_ratelimit::store::permits::{
    Acquired, PermitId, PermitStore, PermitTtl, Renewal, Slot,
};
use tower_redis_ratelimit::{ConcurrencyLimitLayer, Decision, Policy, RedisStore, Store};

fn redis_layer(server: &RedisServer, failure: FailureMode) -> ConcurrencyLimitLayer {
    ConcurrencyLimitLayer::builder()
        .name("ws")
        .max_in_flight(1)
        .key(HeaderKey::new("x-user"))
        .store(RedisStore::open(&server.url()).unwrap())
        .failure_mode(failure)
        .deadline(Duration::from_millis(200))
        .build()
        .unwrap()
}

/// Redis down: failing open lets requests through without a permit and says so; failing closed
/// answers 503 with `Retry-After: 1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_open_or_closed() {
    let mut server = RedisServer::start();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let inner = service_fn(move |request: Request<Body>| {
        let has_permit = request.extensions().get::<ConcurrencyPermit>().is_some();
        record.lock().unwrap().push(has_permit);
        async { Ok::<_, Infallible>(Response::new(Body::empty())) }
    });
    let open = redis_layer(&server, FailureMode::Open).layer(inner.clone());
    let closed = redis_layer(&server, FailureMode::Closed).layer(inner);

    let response = open.clone().oneshot(request("u", "/")).await.unwrap();
    assert_eq!(header(&response, "rate-limiting-state"), "Allow");
    drop(response);
    server.kill();
    for _ in 0..3 {
        let response = open.clone().oneshot(request("u", "/")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, "rate-limiting-state"), "Skipped");
        assert_eq!(header(&response, "ratelimit-policy"), WS_POLICY);
        assert_eq!(header(&response, "ratelimit"), "", "no decision, no count");
        let response = closed.clone().oneshot(request("u", "/")).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(header(&response, "retry-after"), "1");
        assert_eq!(header(&response, "ratelimit-policy"), WS_POLICY);
    }
    assert_eq!(*seen.lock().unwrap(), [true, false, false, false]);
}

/// A frozen Redis: the deadline turns the wait into the failure mode, and the permit that Redis
/// admits once it thaws (the command was already sent) is given back, not leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_hits_the_deadline_and_leaks_nothing() {
    let server = RedisServer::start();
    let ok =
        service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let closed = redis_layer(&server, FailureMode::Closed).layer(ok);
    // Connect first, so that the acquisition below is sent and then waits.
    let warm = closed.clone().oneshot(request("warm", "/")).await.unwrap();
    assert_eq!(warm.status(), StatusCode::OK);
    drop(warm);

    server.freeze();
    let response = closed.clone().oneshot(request("u", "/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    server.thaw();
    eventually(RELEASED_WITHIN, "the late permit given back", || async {
        server.zcard("ratelimit:ws:cc:{u}") == 0 && server.zcard("ratelimit:ws:cc:{warm}") == 0
    })
    .await;
    let response = closed.oneshot(request("u", "/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// The client goes away while Redis holds its acquisition (`CLIENT PAUSE WRITE` blocks the
/// script call, which Redis reports as a blocked client): Redis admits the permit once it resumes,
/// the release sent on cancellation follows it, and the slot is free again at once, not a TTL
/// (a minute here) later. Deterministic: the request is cancelled only once Redis has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_while_redis_holds_the_acquisition() {
    let server = RedisServer::start();
    let ok =
        service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let svc = ConcurrencyLimitLayer::builder()
        .name("ws")
        .max_in_flight(1)
        .key(HeaderKey::new("x-user"))
        .store(RedisStore::open(&server.url()).unwrap())
        .permit_ttl(Duration::from_secs(60))
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap()
        .layer(ok);
    // Connected, and nothing left in flight that the pause could block.
    let warm = svc.clone().oneshot(request("warm", "/")).await.unwrap();
    assert_eq!(warm.status(), StatusCode::OK);
    drop(warm);
    eventually(RELEASED_WITHIN, "the warm-up slot given back", || async {
        server.keys().is_empty()
    })
    .await;
    let writes = || server.info("persistence", "rdb_changes_since_last_save");
    let before = writes();

    assert_eq!(server.cli(&["CLIENT", "PAUSE", "60000", "WRITE"]), "OK");
    let cancelled = tokio::spawn(svc.clone().oneshot(request("u", "/")));
    eventually(RELEASED_WITHIN, "Redis holds the acquisition", || async {
        server.info("clients", "blocked_clients") == 1
    })
    .await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert_eq!(server.cli(&["CLIENT", "UNPAUSE"]), "OK");

    eventually(Duration::from_secs(5), "the slot free again", || async {
        server.zcard("ratelimit:ws:cc:{u}") == 0 && writes() >= before + 3
    })
    .await;
    // ZADD and PEXPIRE of the admission, ZREM of the release.
    assert_eq!(writes(), before + 3, "admitted, then given back");
    let admitted = svc.oneshot(request("u", "/")).await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
}

/// A Redis store that counts the releases the layer asks of it.
#[derive(Clone)]
struct CountingReleases {
    redis: RedisStore,
    releases: Arc<AtomicU32>,
}

impl Store for CountingReleases {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        self.redis.check(key, policy, cost)
    }
}

impl PermitStore for CountingReleases {
    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        ttl: PermitTtl,
    ) -> StoreFuture<Acquired> {
        self.redis.acquire(slot, permit, limit, ttl)
    }

    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.redis.release(slot, permit)
    }

    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        self.redis.renew(renewals)
    }
}

/// An acquisition that failed because no connection could be made was never sent: nothing is
/// released for it (during an outage that would only add connection attempts). One that was sent
/// and timed out is released, since Redis may admit it late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_acquisition_that_may_have_been_sent_is_released() {
    let mut server = RedisServer::start();
    let store = CountingReleases {
        redis: RedisStore::open(&server.url()).unwrap(),
        releases: Arc::default(),
    };
    let ok =
        service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let layer = |failure| {
        ConcurrencyLimitLayer::builder()
            .name("ws")
            .max_in_flight(1)
            .key(HeaderKey::new("x-user"))
            .store(store.clone())
            .failure_mode(failure)
            .deadline(Duration::from_millis(200))
            .build()
            .unwrap()
            .layer(ok)
    };
    let (open, closed) = (layer(FailureMode::Open), layer(FailureMode::Closed));

    // Down before the first connection: every acquisition fails to connect, or fails at once
    // while the store backs off.
    server.kill();
    for _ in 0..3 {
        let passed = open.clone().oneshot(request("u", "/")).await.unwrap();
        assert_eq!(header(&passed, "rate-limiting-state"), "Skipped");
        let refused = closed.clone().oneshot(request("u", "/")).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(store.releases.load(Ordering::SeqCst), 0);

    // Up, then frozen with the connection open: the acquisition is sent and times out.
    server.restart();
    eventually(RELEASED_WITHIN, "Redis answers again", || async {
        let response = closed.clone().oneshot(request("warm", "/")).await.unwrap();
        response.status() == StatusCode::OK
    })
    .await;
    let after_warm_up = store.releases.load(Ordering::SeqCst);
    server.freeze();
    let refused = closed.clone().oneshot(request("u", "/")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    server.thaw();
    assert_eq!(store.releases.load(Ordering::SeqCst), after_warm_up + 1);
    eventually(RELEASED_WITHIN, "the late permit given back", || async {
        server.zcard("ratelimit:ws:cc:{u}") == 0
    })
    .await;
}
