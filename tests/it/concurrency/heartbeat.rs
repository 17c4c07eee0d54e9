//! The heartbeat: one task per store renews every live permit of the process, so a long request
//! keeps its slot across many TTLs; it stops with its store, and outlives store outages.
//!
//! Memory tests run on Tokio's paused clock, which the store reads through `TokioClock`, so
//! TTLs and renewals are exact. Redis tests use the server's clock and real time, with TTLs
//! long against the renewal period (the machine is shared and noisy).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::support::{RedisServer, eventually};
use axum::body::Body;
use http::{Request, Response, StatusCode};
use tokio::sync::Semaphore;
use tower::{ServiceExt, service_fn};
use tower_layer::Layer;
use tower_redis_ratelimit::clock::Clock;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::store::permits::{PermitId, PermitStore, PermitTtl, Slot};
use tower_redis_ratelimit::{ConcurrencyLimitLayer, MemoryStore, RedisStore};

/// Tokio's clock (paused in these tests) as the store's clock, plus a skew the test may add.
struct TokioClock {
    start: tokio::time::Instant,
    skew: Arc<AtomicU64>,
}

impl Clock for TokioClock {
    fn now_micros(&self) -> u64 {
        1_700_000_000_000_000
            + self.start.elapsed().as_micros() as u64
            + self.skew.load(Ordering::SeqCst)
    }
}

fn memory_store() -> MemoryStore {
    MemoryStore::builder()
        .clock(TokioClock {
            start: tokio::time::Instant::now(),
            skew: Arc::default(),
        })
        .build()
}

const TTL: PermitTtl = PermitTtl::new(Duration::from_secs(3));

#[tokio::test(start_paused = true)]
async fn memory_a_held_permit_outlives_many_ttls_and_a_released_one_is_not_renewed() {
    let store = memory_store();
    let slot = Slot::new("ws", "user").unwrap();
    let (held, released) = (PermitId::next(), PermitId::next());
    assert!(
        store
            .acquire(&slot, held, 2, TTL)
            .await
            .unwrap()
            .is_admitted()
    );
    assert!(
        store
            .acquire(&slot, released, 2, TTL)
            .await
            .unwrap()
            .is_admitted()
    );
    assert_eq!(store.renewing(), 2);
    assert!(store.release(&slot, released).await.unwrap());
    assert_eq!(store.renewing(), 1);

    for _ in 0..10 {
        tokio::time::sleep(TTL.duration()).await;
        assert_eq!(store.in_flight(&slot), 1, "renewed every third of a ttl");
    }
    assert!(store.release(&slot, held).await.unwrap());
    assert_eq!(store.renewing(), 0);
}

/// One store shared by a fleet shedder (30 s TTL, renewed every 10 s) and a per-user limit
/// whose 3 s TTL is taken a second later: the heartbeat, asleep until its 10 s round, wakes up
/// for the shorter period, so the short TTL never ends while its permit is held.
#[tokio::test(start_paused = true)]
async fn memory_a_permit_with_a_shorter_ttl_taken_later_is_renewed_in_time() {
    let store = memory_store();
    let fleet = Slot::new("fleet", "fleet").unwrap();
    let user = Slot::new("ws", "user").unwrap();
    let fleet_ttl = PermitTtl::new(Duration::from_secs(30));
    assert!(
        store
            .acquire(&fleet, PermitId::next(), 1, fleet_ttl)
            .await
            .unwrap()
            .is_admitted()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        store
            .acquire(&user, PermitId::next(), 1, TTL)
            .await
            .unwrap()
            .is_admitted()
    );
    for _ in 0..5 {
        tokio::time::sleep(TTL.duration()).await;
        assert_eq!(
            store.in_flight(&user),
            1,
            "the short ttl is renewed in time"
        );
        assert_eq!(store.in_flight(&fleet), 1);
    }
}

/// More permits than one renewal batch holds: every batch is renewed, every round.
#[tokio::test(start_paused = true)]
async fn memory_permits_beyond_one_batch_are_all_renewed() {
    let store = memory_store();
    let slots: Vec<Slot> = (0..110)
        .map(|user| Slot::new("ws", format!("user-{user}")).unwrap())
        .collect();
    for slot in &slots {
        for _ in 0..10 {
            let acquired = store.acquire(slot, PermitId::next(), 10, TTL).await;
            assert!(acquired.unwrap().is_admitted());
        }
    }
    assert_eq!(store.renewing(), 1_100);
    for _ in 0..4 {
        tokio::time::sleep(TTL.duration()).await;
        let live: u64 = slots.iter().map(|slot| store.in_flight(slot)).sum();
        assert_eq!(live, 1_100);
    }
}

/// A renewal that comes too late (here the store's clock jumps two TTLs ahead, as if the
/// heartbeat had been cut off that long) finds the permit gone: it is not revived, the heartbeat
/// stops renewing it, and its slot is free for others.
#[tokio::test(start_paused = true)]
async fn memory_a_permit_whose_ttl_ended_is_lost_not_revived() {
    let skew = Arc::new(AtomicU64::new(0));
    let store = MemoryStore::builder()
        .clock(TokioClock {
            start: tokio::time::Instant::now(),
            skew: skew.clone(),
        })
        .build();
    let slot = Slot::new("ws", "user").unwrap();
    assert!(
        store
            .acquire(&slot, PermitId::next(), 1, TTL)
            .await
            .unwrap()
            .is_admitted()
    );
    skew.store(2 * TTL.duration().as_micros() as u64, Ordering::SeqCst);
    assert_eq!(store.in_flight(&slot), 0);
    // Its next tick (a renewal period after the task started, which it did on the first yield).
    tokio::time::sleep(TTL.renew_every() * 2).await;
    assert_eq!(store.renewing(), 0, "the heartbeat found it gone");
    assert!(
        store
            .acquire(&slot, PermitId::next(), 1, TTL)
            .await
            .unwrap()
            .is_admitted()
    );
}

#[tokio::test(start_paused = true)]
async fn memory_the_heartbeat_task_ends_with_its_store() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let store = memory_store();
    let slot = Slot::new("ws", "user").unwrap();
    let permit = PermitId::next();
    assert!(
        store
            .acquire(&slot, permit, 1, TTL)
            .await
            .unwrap()
            .is_admitted()
    );
    // The janitor and the heartbeat.
    assert_eq!(metrics.num_alive_tasks(), 2);
    tokio::time::sleep(TTL.duration()).await;
    drop(store);
    tokio::time::sleep(TTL.duration()).await;
    assert_eq!(
        metrics.num_alive_tasks(),
        0,
        "no task keeps a dropped store alive"
    );
}

/// A request that runs for several TTLs keeps its slot through the layer, in Redis, in real
/// time: another request is refused throughout, and the slot frees when it ends. Renewals come
/// every 100 ms of a 3 s TTL, so only a stall of almost 3 s could fail this on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_long_request_keeps_its_slot_across_several_ttls() {
    let redis = RedisServer::start();
    let key = "ratelimit:ws:cc:{user}";
    let ttl = Duration::from_secs(3);
    let layer = ConcurrencyLimitLayer::builder()
        .name("ws")
        .max_in_flight(1)
        .key(HeaderKey::new("x-user"))
        .store(RedisStore::open(&redis.url()).unwrap())
        .permit_ttl(ttl)
        .renew_every(Duration::from_millis(100))
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let wait = gate.clone();
    let service = layer.layer(service_fn(move |request: Request<Body>| {
        let wait = wait.clone();
        async move {
            if request.uri().path() == "/long" {
                wait.acquire().await.unwrap().forget();
            }
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }
    }));
    let request = |path: &str| {
        Request::get(path)
            .header("x-user", "user")
            .body(Body::empty())
            .unwrap()
    };
    let long = tokio::spawn(service.clone().oneshot(request("/long")));
    eventually(
        Duration::from_secs(5),
        "the long request holds its slot",
        || async { redis.zcard(key) == 1 },
    )
    .await;
    let until = tokio::time::Instant::now() + ttl * 3;
    while tokio::time::Instant::now() < until {
        let refused = service.clone().oneshot(request("/short")).await.unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let ttl = redis.pttl(key);
        assert!(ttl > 0 && ttl <= 3_000, "PTTL {ttl}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    gate.add_permits(1);
    drop(long.await.unwrap().unwrap());
    eventually(Duration::from_secs(5), "the slot is free again", || async {
        redis.zcard(key) == 0
    })
    .await;
    let admitted = service.oneshot(request("/short")).await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
}

/// Redis frozen for less than a TTL: renewals fail meanwhile, the heartbeat tries again next
/// tick, and the permit survives. Redis restarted empty: the heartbeat finds the permit gone and
/// stops renewing it, without a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_the_heartbeat_survives_outages() {
    let mut redis = RedisServer::start();
    let key = "ratelimit:ws:cc:{user}";
    let store = RedisStore::builder(&redis.url())
        .stale_after(Duration::from_millis(500))
        .build()
        .unwrap();
    let slot = Slot::new("ws", "user").unwrap();
    let ttl = PermitTtl::new(Duration::from_secs(4)).with_renewal_every(Duration::from_millis(400));
    let permit = PermitId::next();
    assert!(
        store
            .acquire(&slot, permit, 1, ttl)
            .await
            .unwrap()
            .is_admitted()
    );

    redis.freeze();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    redis.thaw();
    // Well past the first TTL: only renewals after the thaw can have kept it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(redis.zcard(key), 1, "renewed after the outage");
    assert_eq!(store.renewing(), 1);

    redis.restart();
    eventually(
        Duration::from_secs(10),
        "the lost permit is dropped",
        || async { store.renewing() == 0 },
    )
    .await;
    assert_eq!(redis.zcard(key), 0, "a gone permit is never revived");
    let next = PermitId::next();
    assert!(
        store
            .acquire(&slot, next, 1, ttl)
            .await
            .unwrap()
            .is_admitted()
    );
}

/// A slot key overwritten by another program (a string where a sorted set was): its renewals
/// fail with WRONGTYPE every round, and every other slot is still renewed, in the same batch and
/// in the others (1 100 permits over 110 slots: three batches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_clobbered_slot_keeps_no_other_from_being_renewed() {
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    let ttl = PermitTtl::new(Duration::from_secs(3)).with_renewal_every(Duration::from_millis(100));
    let slots: Vec<Slot> = (0..110)
        .map(|user| Slot::new("ws", format!("user-{user}")).unwrap())
        .collect();
    let mut held = Vec::new();
    for slot in &slots {
        for _ in 0..10 {
            held.push((slot.clone(), PermitId::next()));
        }
    }
    let acquisitions = held
        .iter()
        .map(|(slot, permit)| store.acquire(slot, *permit, 10, ttl));
    for acquired in futures_util::future::join_all(acquisitions).await {
        assert!(acquired.unwrap().is_admitted());
    }
    assert_eq!(
        redis.cli(&["SET", "ratelimit:ws:cc:{user-7}", "clobbered"]),
        "OK"
    );

    // Two TTLs: a slot that was not renewed meanwhile has expired, key and all.
    tokio::time::sleep(ttl.duration() * 2).await;
    let keys = redis.keys();
    assert_eq!(keys.len(), 110, "every other slot is still there");
    let held_in_redis: u64 = keys
        .iter()
        .filter(|key| key.as_str() != "ratelimit:ws:cc:{user-7}")
        .map(|key| redis.zcard(key))
        .sum();
    assert_eq!(held_in_redis, 1_090);
    assert_eq!(
        store.renewing(),
        1_100,
        "a failing renewal is tried again, not taken for a lost permit"
    );
}

/// A store outlives the runtime its heartbeat ran on (a store in a static, tests with a runtime
/// each): the task ended with that runtime, and the next permit taken on another runtime starts a
/// new one.
#[test]
fn memory_the_heartbeat_restarts_on_a_new_runtime() {
    let paused = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let store = paused().block_on(async { memory_store() });
    let slot = Slot::new("ws", "user").unwrap();
    for _ in 0..2 {
        let runtime = paused();
        runtime.block_on(async {
            let permit = PermitId::next();
            assert!(
                store
                    .acquire(&slot, permit, 1, TTL)
                    .await
                    .unwrap()
                    .is_admitted()
            );
            for _ in 0..5 {
                tokio::time::sleep(TTL.duration()).await;
                assert_eq!(store.in_flight(&slot), 1, "renewed on this runtime");
            }
            assert!(store.release(&slot, permit).await.unwrap());
        });
        drop(runtime);
    }
}
