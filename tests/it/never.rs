//! A request that costs more than a rule can ever hold (more than the limit of a window
//! algorithm, more than the burst of a bucket algorithm) is answered the same way by every
//! algorithm on both stores: 429 without `Retry-After`, a problem body saying that retrying will
//! never help, and no state written. Even when the quota is exhausted it stays "never", not
//! "denied": no wait would help.

use std::time::Duration;

use crate::support::{RedisServer, cost, get as send, header, text};
use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::{GlobalKey, Key};
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

const PEER: &str = "192.0.2.77:4000";

/// Every algorithm with a capacity of 4 (the bucket ones with a burst of 4 at 10 per second, so
/// the capacity is not the rate), and the quota as the body names it.
fn rules() -> Vec<(Rule, &'static str)> {
    let window = Quota::new(4, Duration::from_secs(10));
    let bucket = Quota::per_second(10).with_burst(4);
    vec![
        (Rule::fixed_window("fw", window), "4 per 10s"),
        (Rule::sliding_log("log", window), "4 per 10s"),
        (Rule::sliding_window("sw", window, 5), "4 per 10s"),
        (Rule::token_bucket("tb", bucket), "10 per 1s, burst 4"),
        (Rule::gcra("gcra", bucket), "10 per 1s, burst 4"),
    ]
}

async fn never_means_never(store: impl Store + Clone) {
    for (rule, quota) in rules() {
        let name = rule.name().to_owned();
        let policy = Policy::try_from(rule.clone()).unwrap();
        let key = Key::from("everyone");
        let app = Router::new().route("/", get(|| async { "ok" })).layer(
            RateLimitLayer::builder()
                .rule(rule)
                .key(GlobalKey::new("everyone"))
                .store(store.clone())
                .cost(cost)
                .deadline(Duration::from_secs(2))
                .build()
                .unwrap(),
        );
        for exhausted in [false, true] {
            let response = send(&app, "/", PEER, &[("x-cost", "5")]).await;
            assert_eq!(response.status(), 429, "{name}");
            assert_eq!(header(&response, "retry-after"), "", "{name}");
            let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
            assert!(body.get("retry_after").is_none(), "{name}: {body}");
            assert_eq!(
                body["detail"],
                format!(
                    "This request costs 5 but the rate limit \"{name}\" ({quota}) admits at most 4 \
                     at once; it can never be allowed, so do not retry it."
                ),
            );
            let peek = store.check(&key, &policy, 0).await.unwrap();
            let used = if exhausted { 4 } else { 0 };
            assert_eq!((peek.used(), peek.remaining()), (used, 4 - used), "{name}");
            if !exhausted {
                // Exhaust the quota: the next costly request must still be "never".
                let all = send(&app, "/", PEER, &[("x-cost", "4")]).await;
                assert_eq!(all.status(), 200, "{name}");
                let over = store.check(&key, &policy, 1).await.unwrap();
                assert_eq!(over.outcome(), Outcome::Denied, "{name}");
            }
        }
    }
}

#[tokio::test]
async fn every_algorithm_says_never_in_memory() {
    let store = MemoryStore::builder()
        .clock(ManualClock::starting_now())
        .build();
    never_means_never(store.clone()).await;
    // Only the requests that fit wrote state: one key.
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn every_algorithm_says_never_in_redis() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(&redis.url())
        .clock(ManualClock::starting_now())
        .build()
        .unwrap();
    never_means_never(store).await;
    // One key per algorithm, written by the request that fit.
    assert_eq!(redis.keys().len(), 5);
}
