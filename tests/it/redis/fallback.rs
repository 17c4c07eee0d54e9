//! The Redis store's fallback: while Redis fails, a local store decides with each quota divided
//! by the number of instances, and says so; a breaker stops calling a dead or frozen Redis, then
//! lets a single call probe it, and limiting returns to Redis by itself.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use futures_util::FutureExt;
use http::StatusCode;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::store::Fallback;
use tower_redis_ratelimit::{ConfigError, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use crate::support::{RedisServer, eventually, header, timed_get};

const PEER: &str = "203.0.113.7:4000";
const COOL_DOWN: Duration = Duration::from_millis(500);

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(&redis.url())
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(100))
        .stale_after(Duration::from_secs(30))
        .fallback(
            Fallback::new(2)
                .timeout(Duration::from_millis(50))
                .failures(3)
                .cool_down(COOL_DOWN),
        )
        .build()
        .unwrap()
}

fn policy() -> Policy {
    Policy::try_from(Rule::fixed_window("api", Quota::per_minute(10))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_down_a_share_of_the_quota_is_decided_locally_and_the_response_says_so() {
    let mut redis = RedisServer::start();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(10)))
        .key(HeaderKey::new("x-client"))
        .store(store(&redis))
        // The fallback answers instead of the failure mode: no 503 while it decides.
        .failure_mode(FailureMode::Closed)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let get = |client: &'static str| {
        let app = app.clone();
        async move { timed_get(&app, "/", PEER, &[("x-client", client)]).await.0 }
    };
    let response = get("a").await;
    assert_eq!(header(&response, "rate-limiting-state"), "Allow");

    redis.kill();
    // Two instances share the quota of 10: this one admits 5 of a new client, then refuses,
    // every answer marked as degraded.
    for used in 1..=5 {
        let response = get("b").await;
        assert_eq!(response.status(), StatusCode::OK, "request {used}");
        assert_eq!(header(&response, "rate-limiting-state"), "Degraded");
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string()
        );
        assert_eq!(
            header(&response, "ratelimit"),
            format!("\"api\";r={};t=60", 5 - used)
        );
    }
    let refused = get("b").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "rate-limiting-state"), "Degraded");

    // Redis returns: after the cool-down, a probe finds it, and decisions are Redis's again.
    redis.restart();
    eventually(
        Duration::from_secs(10),
        "decisions from Redis again",
        || async { header(&get("c").await, "rate-limiting-state") == "Allow" },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_costs_no_latency_once_the_breaker_opens_and_one_call_probes_its_return() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let key = Key::from("client");
    assert!(!store.check(&key, &policy(), 1).await.unwrap().is_degraded());

    // A frozen Redis answers nothing: the first calls wait for the fallback's timeout (50 ms),
    // then the breaker opens and the fallback answers at once.
    redis.freeze();
    for _ in 0..3 {
        let started = Instant::now();
        let decision = store.check(&key, &policy(), 1).await.unwrap();
        assert!(decision.is_degraded());
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
    // With the breaker open, a decision waits for nothing: it is answered when first polled.
    for i in 0..100 {
        let decision = store
            .check(&Key::from("other"), &policy(), 0)
            .now_or_never()
            .unwrap_or_else(|| panic!("decision {i} with the breaker open waited for Redis"))
            .unwrap();
        assert!(decision.is_degraded());
    }

    // After the cool-down, many requests at once while Redis is still frozen: one of them
    // probes Redis (and waits the fallback's timeout), the others are answered when first
    // polled; so when Redis returns it meets one call, not a stampede.
    tokio::time::sleep(COOL_DOWN).await;
    let mut waiting = Vec::new();
    for i in 0..50 {
        let mut decision = store.check(&Key::from(format!("burst-{i}")), &policy(), 1);
        match (&mut decision).now_or_never() {
            Some(decision) => assert!(decision.unwrap().is_degraded()),
            None => waiting.push(decision),
        }
    }
    assert_eq!(waiting.len(), 1, "requests that called the frozen Redis");
    // The probe is answered by the fallback once its timeout passes.
    assert!(waiting.pop().unwrap().await.unwrap().is_degraded());

    // Redis thaws: the next probe finds it, and decisions are Redis's again.
    redis.thaw();
    eventually(
        Duration::from_secs(5),
        "every decision from Redis again",
        || async {
            !store
                .check(&Key::from("after"), &policy(), 1)
                .await
                .unwrap()
                .is_degraded()
        },
    )
    .await;
}

/// The documented bound of what a frozen Redis counts twice: the calls an instance sent from
/// the freeze until its breaker opened run when Redis resumes, and count there too; the requests
/// the breaker kept away from Redis count only in the fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_counts_again_the_calls_sent_until_the_breaker_opened_and_no_others() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let key = Key::from("client");
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(100))).unwrap();
    assert_eq!(store.check(&key, &policy, 1).await.unwrap().used(), 1);

    // Ten requests at once, all sent before the first times out: each is answered by the
    // fallback after 50 ms, and the breaker (3 failures) opens.
    redis.freeze();
    let in_flight: Vec<_> = (0..10)
        .map(|_| {
            let (store, key, policy) = (store.clone(), key.clone(), policy.clone());
            tokio::spawn(async move { store.check(&key, &policy, 1).await.unwrap() })
        })
        .collect();
    for task in in_flight {
        assert!(task.await.unwrap().is_degraded());
    }
    // Twenty more while the breaker is open: none is sent.
    for _ in 0..20 {
        assert!(store.check(&key, &policy, 1).await.unwrap().is_degraded());
    }
    redis.thaw();
    // A cost-0 probe finds Redis again, after the cool-down, and counts nothing.
    let mut decision = store.check(&key, &policy, 0).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while decision.is_degraded() {
        assert!(
            Instant::now() < deadline,
            "Redis not used again within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        decision = store.check(&key, &policy, 0).await.unwrap();
    }
    // Redis ran the ten calls when it resumed: 1 + 10, though the fallback decided them (and
    // counted them, with the twenty others, in its own share).
    assert_eq!(decision.used(), 11);
}

#[test]
fn a_fallback_timeout_at_or_above_the_layer_deadline_is_refused_when_the_layer_is_built() {
    let layer = |timeout: u64, deadline: u64| {
        RateLimitLayer::builder()
            .rule(Rule::fixed_window("api", Quota::per_minute(10)))
            .key(HeaderKey::new("x-client"))
            .store(
                RedisStore::builder("redis://127.0.0.1:6379")
                    .fallback(Fallback::new(2).timeout(Duration::from_millis(timeout)))
                    .build()
                    .unwrap(),
            )
            .deadline(Duration::from_millis(deadline))
            .build()
    };
    for (timeout, deadline) in [(150, 100), (100, 100)] {
        let error = layer(timeout, deadline).unwrap_err();
        assert_eq!(
            error,
            ConfigError::FallbackAfterDeadline {
                timeout: Duration::from_millis(timeout),
                deadline: Duration::from_millis(deadline),
            }
        );
        assert_eq!(
            error.to_string(),
            format!(
                "the store's fallback answers after {timeout}ms, but the layer's deadline is \
                 {deadline}ms: the deadline would answer first, with the failure mode, and the \
                 fallback never; set the fallback's timeout below the deadline, or raise the \
                 deadline"
            )
        );
    }
    assert!(layer(99, 100).is_ok());
    // The default fallback timeout (50 ms) is below the default deadline (100 ms).
    assert!(
        RateLimitLayer::builder()
            .rule(Rule::fixed_window("api", Quota::per_minute(10)))
            .key(HeaderKey::new("x-client"))
            .store(
                RedisStore::builder("redis://127.0.0.1:6379")
                    .fallback(Fallback::new(2))
                    .build()
                    .unwrap()
            )
            .build()
            .is_ok()
    );
}

#[test]
fn bad_fallback_settings_are_refused_with_what_is_wrong() {
    for (fallback, expected) in [
        (Fallback::new(0), "at least 1 instance"),
        (Fallback::new(2).timeout(Duration::ZERO), "timeout is zero"),
        (Fallback::new(2).failures(0), "at least 1 failure"),
        (
            Fallback::new(2).cool_down(Duration::ZERO),
            "cool-down is zero",
        ),
    ] {
        let error = RedisStore::builder("redis://127.0.0.1:6379")
            .fallback(fallback)
            .build()
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{error:?} lacks {expected:?}");
    }
}
