//! The concurrency operations of both stores (`Store::acquire`, `release`, `renew`): the same
//! scenario, driven by a clock the test moves, gives the same answers in memory and in Redis; and
//! what Redis holds: the key format, a TTL on every write, nothing written on a refusal, nothing
//! left once every permit is given back.

use std::time::Duration;

use crate::support::RedisServer;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::store::permits::{
    Acquired, PermitId, PermitStore, PermitTtl, Renewal, Slot,
};
use tower_redis_ratelimit::{MemoryStore, RedisStore};

const TTL: PermitTtl = PermitTtl::new(Duration::from_secs(10));

fn renewal(slot: &Slot, permit: PermitId) -> Renewal {
    Renewal {
        slot: slot.clone(),
        permit,
        ttl: TTL.duration(),
    }
}

/// One scenario, step by step; every answer is asserted exactly.
async fn ttl_semantics(store: &impl PermitStore, clock: &ManualClock) {
    let slot = Slot::new("ws", "user-1").unwrap();
    let other = Slot::new("ws", "user-2").unwrap();
    let [a, b, c, d, e] = [(); 5].map(|_| PermitId::next());

    // t=0: two of two slots, the third refused; another client is not affected.
    assert_eq!(
        store.acquire(&slot, a, 2, TTL).await.unwrap(),
        Acquired::new(true, 1)
    );
    assert_eq!(
        store.acquire(&slot, b, 2, TTL).await.unwrap(),
        Acquired::new(true, 2)
    );
    assert_eq!(
        store.acquire(&slot, c, 2, TTL).await.unwrap(),
        Acquired::new(false, 2)
    );
    assert_eq!(
        store.acquire(&other, c, 2, TTL).await.unwrap(),
        Acquired::new(true, 1)
    );
    assert!(store.release(&other, c).await.unwrap());

    // Giving one back makes room at once.
    assert!(store.release(&slot, a).await.unwrap());
    assert!(!store.release(&slot, a).await.unwrap(), "released twice");
    assert_eq!(
        store.acquire(&slot, c, 2, TTL).await.unwrap(),
        Acquired::new(true, 2)
    );

    // t=5 s: b is renewed (until 15 s), c is not (it ends at 10 s).
    clock.advance(Duration::from_secs(5));
    assert!(store.renew(&[renewal(&slot, b)]).await.unwrap().is_empty());
    assert_eq!(
        store.acquire(&slot, d, 2, TTL).await.unwrap(),
        Acquired::new(false, 2)
    );

    // t=11 s: c's TTL ended: renewing it reports it gone, its slot is free, b still holds.
    clock.advance(Duration::from_secs(6));
    let gone = store
        .renew(&[renewal(&slot, b), renewal(&slot, c), renewal(&other, e)])
        .await
        .unwrap();
    let mut expected = vec![c, e];
    expected.sort();
    let mut gone = gone;
    gone.sort();
    assert_eq!(gone, expected, "c expired, e was never held");
    assert!(!store.release(&slot, c).await.unwrap(), "c had expired");
    assert_eq!(
        store.acquire(&slot, d, 2, TTL).await.unwrap(),
        Acquired::new(true, 2)
    );

    // A renewal never revives an expired TTL, even when the slot has room again.
    clock.advance(Duration::from_secs(30));
    assert_eq!(store.renew(&[renewal(&slot, b)]).await.unwrap(), vec![b]);
    assert_eq!(
        store.acquire(&slot, e, 1, TTL).await.unwrap(),
        Acquired::new(true, 1)
    );
    assert!(store.release(&slot, e).await.unwrap());
    assert!(!store.release(&slot, d).await.unwrap(), "d expired with b");
}

#[tokio::test]
async fn memory_store_permits() {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    ttl_semantics(&store, &clock).await;
    let slot = Slot::new("ws", "user-1").unwrap();
    assert_eq!(store.in_flight(&slot), 0);
    assert_eq!(
        store.renewing(),
        0,
        "released permits and those a renewal found gone are not renewed"
    );
}

#[tokio::test]
async fn redis_store_permits_answer_as_the_memory_store() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = RedisStore::builder(&redis.url())
        .clock(clock.clone())
        .build()
        .unwrap();
    ttl_semantics(&store, &clock).await;
    assert_eq!(redis.zcard("ratelimit:ws:cc:{user-1}"), 0);
}

/// With the server's clock: the key is `<prefix>:<name>:cc:{<client>}`, its TTL is the longest
/// TTL, a refusal does not write, and the key disappears with its last permit.
#[tokio::test]
async fn redis_keys_are_hash_tagged_expiring_and_untouched_by_refusals() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(&redis.url())
        .prefix("app")
        .build()
        .unwrap();
    let slot = Slot::new("ws", "user-9").unwrap();
    let key = "app:ws:cc:{user-9}";
    let (a, b) = (PermitId::next(), PermitId::next());
    assert!(store.acquire(&slot, a, 1, TTL).await.unwrap().is_admitted());
    let ttl = redis.pttl(key);
    assert!(ttl > 0 && ttl <= 10_000, "PTTL {ttl}");
    assert_eq!(
        redis.cli(&["ZRANGE", key, "0", "-1"]),
        a.to_string(),
        "members are permit ids"
    );

    let changes = || redis.info("persistence", "rdb_changes_since_last_save");
    let before = changes();
    for _ in 0..5 {
        assert_eq!(
            store.acquire(&slot, b, 1, TTL).await.unwrap(),
            Acquired::new(false, 1)
        );
    }
    assert_eq!(changes(), before, "a refusal writes nothing");

    assert!(store.release(&slot, a).await.unwrap());
    assert_eq!(redis.keys(), Vec::<String>::new(), "nothing left behind");

    // A long or binary client key is stored as a digest, still hash-tagged.
    let long = Slot::new("ws", "k".repeat(500)).unwrap();
    assert!(store.acquire(&long, a, 1, TTL).await.unwrap().is_admitted());
    let keys = redis.keys();
    assert_eq!(keys.len(), 1);
    assert!(
        keys[0].starts_with("app:ws:cc:{#") && keys[0].len() < 60,
        "{keys:?}"
    );
}

/// Renewals of many permits over many slots take one call per slot, sent together, and report
/// exactly the permits that were gone.
#[tokio::test]
async fn redis_renews_many_permits_at_once() {
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    let mut renewals = Vec::new();
    for user in 0..20 {
        let slot = Slot::new("api", format!("user-{user}")).unwrap();
        for _ in 0..3 {
            let permit = PermitId::next();
            assert!(
                store
                    .acquire(&slot, permit, 5, TTL)
                    .await
                    .unwrap()
                    .is_admitted()
            );
            renewals.push(renewal(&slot, permit));
        }
    }
    // Release every fourth: those are gone, the rest are renewed.
    let mut released: Vec<PermitId> = Vec::new();
    for renewal in renewals.iter().step_by(4) {
        assert!(store.release(&renewal.slot, renewal.permit).await.unwrap());
        released.push(renewal.permit);
    }
    let mut gone = store.renew(&renewals).await.unwrap();
    gone.sort();
    released.sort();
    assert_eq!(gone, released);
    assert_eq!(redis.zcard("ratelimit:api:cc:{user-1}"), 3 - 1);
    assert_eq!(redis.keys().len(), 20);
    for key in redis.keys() {
        let ttl = redis.pttl(&key);
        assert!(ttl > 0 && ttl <= 10_000, "{key}: PTTL {ttl}");
    }
}

/// An unreachable Redis is an error, not a hang and not a panic, for every operation.
#[tokio::test]
async fn redis_errors_are_errors() {
    let mut redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    redis.kill();
    let slot = Slot::new("ws", "user-1").unwrap();
    let permit = PermitId::next();
    let bounded = Duration::from_secs(5);
    let acquire = tokio::time::timeout(bounded, store.acquire(&slot, permit, 1, TTL));
    assert!(acquire.await.unwrap().is_err());
    let release = tokio::time::timeout(bounded, store.release(&slot, permit));
    assert!(release.await.unwrap().is_err());
    let renew = tokio::time::timeout(bounded, store.renew(&[renewal(&slot, permit)]));
    assert!(renew.await.unwrap().is_err());
}
