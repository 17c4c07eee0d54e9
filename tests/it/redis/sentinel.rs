//! The Redis store on Redis Sentinel (a primary, its replica and three sentinels, started by the
//! test): it finds the primary through the sentinels, and follows it across a failover asked
//! with `SENTINEL FAILOVER` and across the primary's death, with no restart.

use std::time::Duration;

use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, Policy, Quota, RedisStore, Rule, Store};

use crate::support::sentinel::{MASTER, RedisSentinels};

fn policy() -> Policy {
    Policy::try_from(Rule::fixed_window("api", Quota::per_hour(1_000))).unwrap()
}

async fn check(store: &RedisStore, key: &str) -> Option<Decision> {
    store.check(&Key::from(key), &policy(), 1).await.ok()
}

/// Waits until `key` is counted again, on whichever server is primary now, and returns the count
/// it reports.
async fn counted_again(store: &RedisStore, key: &str) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(decision) = check(store, key).await.filter(Decision::is_allowed) {
            return decision.used();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no decision from the new primary within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_the_primary_across_a_failover_and_a_killed_primary() {
    let mut sentinels = RedisSentinels::start();
    let urls = sentinels.urls();
    let store = RedisStore::sentinel(&urls, MASTER)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
        .build()
        .unwrap();
    assert!(
        store
            .redacted_url()
            .starts_with("Redis Sentinel redis://127.0.0.1:")
    );
    for n in 1..=3 {
        assert_eq!(check(&store, "client").await.unwrap().used(), n);
    }
    let first = sentinels.primary_port();

    // A failover asked of the sentinels: once the old primary is a replica it refuses writes
    // (READONLY); the store asks the sentinels again and counts on the new one. The counts
    // carried over by replication are kept.
    sentinels.failover();
    assert_ne!(sentinels.primary_port(), first);
    let used = counted_again(&store, "client").await;
    assert!(
        used >= 4,
        "the count went on from the replicated state: {used}"
    );
    let key = "ratelimit:api:fw-1h:{client}";
    assert_eq!(
        sentinels.primary().cli(&["HGET", key, "n"]),
        used.to_string(),
        "counted on the new primary"
    );

    // The primary dies: the sentinels promote the replica, and the store follows.
    let second = sentinels.primary_port();
    sentinels.kill_primary();
    assert_ne!(sentinels.primary_port(), second);
    let after = counted_again(&store, "other-client").await;
    assert_eq!(after, 1);
    assert_eq!(
        sentinels
            .primary()
            .cli(&["HGET", "ratelimit:api:fw-1h:{other-client}", "n"]),
        "1"
    );
}

#[test]
fn sentinel_settings_are_checked_when_the_store_is_built() {
    let error = RedisStore::sentinel(Vec::<String>::new(), MASTER)
        .build()
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("Redis Sentinel needs at least one URL"),
        "{error}"
    );
    let error = RedisStore::sentinel(["redis://127.0.0.1:26379"], "")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("name of the primary"), "{error}");
    let error = RedisStore::sentinel(["http://nope"], MASTER)
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("invalid Redis Sentinel URL"),
        "{error}"
    );
}
