//! Time-dependent decisions on a `ManualClock`: no sleeps, exact to the microsecond. Window
//! resets, GCRA bursts and spacing, retry times a client can rely on, requests that can never
//! pass, cost-0 peeks, and several rules at once.
//!
//! Every scenario runs on both stores: `<scenario>::memory` on a `MemoryStore`, and
//! `<scenario>::redis` on a `RedisStore` (whose script then uses the caller's time instead of the
//! server's) checked at every step against a `MemoryStore` on the same clock, so the two must give
//! equal `Decision`s throughout, besides the exact values the scenario expects.
//!
//! `fixed_window`, `gcra`: windows and buckets through time; `retry_after`: the waits a client is
//! told; `never_and_peeks`: requests that can never pass and cost-0 peeks; `rules`: several rules,
//! all or nothing; `agreement`: thousands of random steps on both stores at once.

/// Makes two tests of each `async fn <scenario>(stores: Stores)` listed: `<scenario>::memory` and
/// `<scenario>::redis`.
macro_rules! on_both_stores {
    ($($scenario:ident),+ $(,)?) => {$(
        mod $scenario {
            #[tokio::test]
            async fn memory() {
                super::$scenario(crate::timing::Stores::memory()).await;
            }

            #[tokio::test]
            async fn redis() {
                super::$scenario(crate::timing::Stores::redis()).await;
            }
        }
    )+};
}

mod agreement;
mod fixed_window;
mod gcra;
mod never_and_peeks;
mod retry_after;
mod rules;

use std::sync::Arc;
use std::time::Duration;

use crate::support::RedisServer;
use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::clock::{Clock, ManualClock};
use tower_redis_ratelimit::decision::{Outcome, RuleVerdict};
use tower_redis_ratelimit::key::{ClientIp, Key};
use tower_redis_ratelimit::store::StoreFuture;
use tower_redis_ratelimit::{
    Decision, MemoryStore, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store,
};

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const PEER: &str = "203.0.113.5:4000";

/// The stores a scenario runs on, on one clock: a `MemoryStore`, and for the Redis run a
/// `RedisStore` that answers every request the memory store answers too.
struct Stores {
    clock: ManualClock,
    memory: MemoryStore,
    redis: Option<(RedisStore, RedisServer)>,
}

impl Stores {
    fn memory() -> Self {
        let clock = ManualClock::new(T0);
        Stores {
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            clock,
            redis: None,
        }
    }

    fn redis() -> Self {
        let server = RedisServer::start();
        let stores = Stores::memory();
        let redis = RedisStore::builder(&server.url())
            .clock(stores.clock.clone())
            .build()
            .unwrap();
        Stores {
            redis: Some((redis, server)),
            ..stores
        }
    }

    /// One request to every store; with Redis, both decisions must be equal.
    async fn check(&self, key: &str, policy: &Policy, cost: u32) -> Decision {
        let key = Key::from(key);
        let memory = self.memory.check(&key, policy, cost).await.unwrap();
        let Some((redis, _)) = &self.redis else {
            return memory;
        };
        let redis = redis.check(&key, policy, cost).await.unwrap();
        assert_eq!(
            redis,
            memory,
            "Redis and memory disagree at +{} µs on {key:?}, cost {cost}",
            self.now() - T0
        );
        redis
    }

    /// The store for a layer: the memory store, or Redis checked against it on every request.
    fn store(&self) -> Arc<dyn Store> {
        match &self.redis {
            None => Arc::new(self.memory.clone()),
            Some((redis, _)) => Arc::new(Compared {
                memory: self.memory.clone(),
                redis: redis.clone(),
            }),
        }
    }

    /// What the stores hold: state for `clients` client keys in memory, and in Redis exactly the
    /// `redis_keys`, every one with a TTL.
    fn assert_stored(&self, clients: usize, redis_keys: &[&str]) {
        assert_eq!(self.memory.len(), clients, "client keys in memory");
        let Some((_, server)) = &self.redis else {
            return;
        };
        let mut keys = server.keys();
        keys.sort();
        let mut expected = redis_keys.to_vec();
        expected.sort();
        assert_eq!(keys, expected, "keys in Redis");
        for key in &keys {
            let ttl = server.pttl(key);
            assert!(ttl > 0, "every key has a TTL: {key} has PTTL {ttl}");
        }
    }

    /// The clock's time, in µs.
    fn now(&self) -> u64 {
        self.clock.now_micros()
    }

    fn advance_us(&self, us: u64) {
        self.clock.advance(micros(us));
    }
}

/// A Redis store whose every decision must equal the memory store's.
struct Compared {
    memory: MemoryStore,
    redis: RedisStore,
}

impl Store for Compared {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        let (memory, redis) = (self.memory.clone(), self.redis.clone());
        let (key, policy) = (key.clone(), policy.clone());
        StoreFuture::new(async move {
            let in_memory = memory.check(&key, &policy, cost).await?;
            let in_redis = redis.check(&key, &policy, cost).await?;
            assert_eq!(
                in_redis, in_memory,
                "Redis and memory disagree on {key:?}, cost {cost}"
            );
            Ok(in_redis)
        })
    }
}

/// 5 per 10 s.
fn fixed_window() -> Policy {
    Policy::try_from(Rule::fixed_window(
        "fw",
        Quota::new(5, Duration::from_secs(10)),
    ))
    .unwrap()
}

/// 3 per 10 s, burst 3: one request drains every 10/3 s.
fn gcra() -> Policy {
    Policy::try_from(Rule::gcra("gcra", Quota::new(3, Duration::from_secs(10)))).unwrap()
}

/// The decision of a one-rule policy.
fn expect(
    policy: &Policy,
    outcome: Outcome,
    remaining: u64,
    used: u64,
    reset_us: u64,
    retry_us: u64,
) -> Decision {
    Decision::from_verdicts(
        policy,
        &[RuleVerdict::new(
            outcome,
            remaining,
            used,
            Duration::from_micros(reset_us),
            Duration::from_micros(retry_us),
        )],
    )
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// A router limiting `/` by `rule` per client address, each request costing `cost`.
fn app(stores: &Stores, rule: Rule, cost: u32) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(rule)
        .key(ClientIp::peer())
        .store(stores.store())
        .cost(move |_| cost)
        // Generous: the first Redis call connects, and debug builds on a busy machine are slow.
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}
