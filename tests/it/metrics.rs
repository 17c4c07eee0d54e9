//! Metrics through the `metrics` facade: decisions by rule and outcome, near-limit admissions,
//! store latency and errors, denial-cache hits, fallback decisions and concurrency refusals,
//! captured by a recorder local to each test.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::store::Fallback;
use tower_redis_ratelimit::{
    ConcurrencyLimitLayer, Policy, Quota, RateLimitLayer, RedisStore, Rule,
};

use crate::support::{RedisServer, timed_get};

const PEER: &str = "203.0.113.7:4000";

/// Runs `work` on a runtime of this thread with a recorder of its own; every metric recorded, as
/// `name{label=value,...}` and its value (a counter's count, a histogram's number of samples).
fn recorded(work: impl std::future::Future<Output = ()>) -> Vec<(String, u64)> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work);
    });
    let mut metrics: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            labels.sort();
            let value = match value {
                DebugValue::Counter(count) => count,
                DebugValue::Histogram(samples) => samples.len() as u64,
                DebugValue::Gauge(value) => value.into_inner() as u64,
            };
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect();
    metrics.sort();
    metrics
}

fn value(metrics: &[(String, u64)], name: &str) -> u64 {
    metrics
        .iter()
        .find(|(metric, _)| metric == name)
        .map_or(0, |(_, value)| *value)
}

fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

#[test]
fn decisions_are_counted_by_rule_and_outcome_with_the_near_limit_ones() {
    let metrics = recorded(async {
        let limited = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("api", Quota::per_minute(5)))
            .key(HeaderKey::new("x-client"))
            .build()
            .unwrap());
        let shadow = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("trial", Quota::per_minute(1)))
            .key(HeaderKey::new("x-client"))
            .shadow(true)
            .build()
            .unwrap());
        for _ in 0..7 {
            timed_get(&limited, "/", PEER, &[("x-client", "a")]).await;
        }
        for _ in 0..3 {
            timed_get(&shadow, "/", PEER, &[("x-client", "a")]).await;
        }
    });
    assert_eq!(
        value(
            &metrics,
            "ratelimit_decisions_total{outcome=allowed,plan=,rule=api}"
        ),
        5
    );
    assert_eq!(
        value(
            &metrics,
            "ratelimit_decisions_total{outcome=denied,plan=,rule=api}"
        ),
        2
    );
    // Remaining 1 and 0 of 5: a fifth or less left.
    assert_eq!(
        value(&metrics, "ratelimit_near_limit_total{plan=,rule=api}"),
        2
    );
    assert_eq!(
        value(
            &metrics,
            "ratelimit_decisions_total{outcome=shadow_allowed,plan=,rule=trial}"
        ),
        1
    );
    assert_eq!(
        value(
            &metrics,
            "ratelimit_decisions_total{outcome=shadow_denied,plan=,rule=trial}"
        ),
        2
    );
    // Near the limit counts what an enforced limit admitted only.
    assert_eq!(
        value(&metrics, "ratelimit_near_limit_total{plan=,rule=trial}"),
        0
    );
}

#[test]
fn two_plans_rules_of_one_name_are_separate_series_and_unknown_plans_are_counted() {
    let metrics = recorded(async {
        let pro = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(5))).unwrap();
        let app = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("api", Quota::per_minute(2)))
            .plan("pro", &pro)
            .choose_plan(crate::support::plan)
            .key(HeaderKey::new("x-client"))
            .build()
            .unwrap());
        for (client, plan, requests) in [
            ("a", None, 3),
            ("b", Some("pro"), 3),
            ("c", Some("gold"), 2),
        ] {
            let mut headers = vec![("x-client", client)];
            headers.extend(plan.map(|plan| ("x-plan", plan)));
            for _ in 0..requests {
                timed_get(&app, "/", PEER, &headers).await;
            }
        }
    });
    let decisions = |outcome: &str, plan: &str| {
        value(
            &metrics,
            &format!("ratelimit_decisions_total{{outcome={outcome},plan={plan},rule=api}}"),
        )
    };
    // The default policy: client a (2 of 3) and client c, whose plan "gold" the layer lacks.
    assert_eq!(decisions("allowed", ""), 2 + 2);
    assert_eq!(decisions("denied", ""), 1);
    assert_eq!(decisions("allowed", "pro"), 3);
    assert_eq!(decisions("denied", "pro"), 0);
    // 2 of 5 left is not near; of 2, the second request of a and of c leaves none.
    assert_eq!(
        value(&metrics, "ratelimit_near_limit_total{plan=pro,rule=api}"),
        0
    );
    assert_eq!(
        value(&metrics, "ratelimit_near_limit_total{plan=,rule=api}"),
        2
    );
    assert_eq!(value(&metrics, "ratelimit_unknown_plan_total{}"), 2);
}

#[test]
fn redis_calls_are_timed_and_cache_hits_errors_and_fallbacks_counted() {
    let redis = RedisServer::start();
    let url = redis.url();
    let metrics = recorded(async move {
        let cached = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("api", Quota::per_minute(1)))
            .key(HeaderKey::new("x-client"))
            .store(RedisStore::open(&url).unwrap())
            .deadline(Duration::from_secs(2))
            .build()
            .unwrap());
        // One admitted and one denied by Redis, then four denials from the cache.
        for _ in 0..6 {
            timed_get(&cached, "/", PEER, &[("x-client", "a")]).await;
        }
        // Nothing listens on port 1: a store error, then a fallback decision.
        let failing = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("down", Quota::per_minute(10)))
            .key(HeaderKey::new("x-client"))
            .store(RedisStore::open("redis://127.0.0.1:1").unwrap())
            .failure_mode(FailureMode::Open)
            .build()
            .unwrap());
        timed_get(&failing, "/", PEER, &[("x-client", "a")]).await;
        let falling_back = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("degraded", Quota::per_minute(10)))
            .key(HeaderKey::new("x-client"))
            .store(
                RedisStore::builder("redis://127.0.0.1:1")
                    .fallback(Fallback::new(2))
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap());
        timed_get(&falling_back, "/", PEER, &[("x-client", "a")]).await;
    });
    assert_eq!(
        value(&metrics, "ratelimit_store_seconds{limiting=rate limiting}"),
        2 + 2
    );
    assert_eq!(value(&metrics, "ratelimit_denial_cache_hits_total{}"), 4);
    // The failing store's error, and the one the fallback answered for.
    assert_eq!(
        value(
            &metrics,
            "ratelimit_store_errors_total{kind=never_sent,limiting=rate limiting}"
        ),
        2
    );
    assert_eq!(value(&metrics, "ratelimit_fallback_decisions_total{}"), 1);
    assert_eq!(
        value(
            &metrics,
            "ratelimit_decisions_total{outcome=allowed,plan=,rule=degraded}"
        ),
        1
    );
}

/// The fallback answers in Redis's place, yet every Redis call that failed is a store error: the
/// "Redis trouble" alert of `docs/observability.md` fires during an outage with a fallback.
/// Calls the breaker keeps away from Redis are not store calls, and are not counted.
#[test]
fn store_errors_are_counted_when_the_fallback_answers() {
    let redis = RedisServer::start();
    let url = redis.url();
    let metrics = recorded(async {
        let app = app(RateLimitLayer::builder()
            .rule(Rule::fixed_window("api", Quota::per_minute(100)))
            .key(HeaderKey::new("x-client"))
            .store(
                RedisStore::builder(&url)
                    .fallback(
                        Fallback::new(2)
                            .timeout(Duration::from_millis(50))
                            .failures(3),
                    )
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap());
        timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
        // Frozen: three calls time out, then the breaker answers without calling.
        redis.freeze();
        for _ in 0..5 {
            let (response, _) = timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
            assert_eq!(
                response.headers()["rate-limiting-state"],
                "Degraded",
                "answered by the fallback"
            );
        }
        redis.thaw();
    });
    assert_eq!(
        value(
            &metrics,
            "ratelimit_store_errors_total{kind=timeout,limiting=rate limiting}"
        ),
        3
    );
    assert_eq!(value(&metrics, "ratelimit_fallback_decisions_total{}"), 5);
}

#[test]
fn concurrency_refusals_are_counted() {
    let metrics = recorded(async {
        let layer = ConcurrencyLimitLayer::builder()
            .name("uploads")
            .max_in_flight(1)
            .key(HeaderKey::new("x-client"))
            .build()
            .unwrap();
        let gate = std::sync::Arc::new(tokio::sync::Notify::new());
        let wait = gate.clone();
        let app = Router::new()
            .route(
                "/",
                get(move || {
                    let wait = wait.clone();
                    async move {
                        wait.notified().await;
                        "done"
                    }
                }),
            )
            .layer(layer);
        let held = tokio::spawn({
            let app = app.clone();
            async move { timed_get(&app, "/", PEER, &[("x-client", "a")]).await }
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (refused, _) = timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
        assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
        gate.notify_waiters();
        held.await.unwrap();
    });
    assert_eq!(
        value(
            &metrics,
            "ratelimit_concurrency_refused_total{limit=uploads}"
        ),
        1
    );
}

/// `describe_metrics` gives every metric its help text (Prometheus's `# HELP`) and unit, and
/// exports the counters without labels, and rate limits' store errors by kind, at 0 before
/// anything happened: a dashboard tells "none yet" from "not exported".
#[test]
fn described_metrics_have_help_and_their_counters_start_at_zero() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, tower_redis_ratelimit::describe_metrics);
    let snapshot = snapshotter.snapshot().into_vec();
    let described = |name: &str| {
        snapshot
            .iter()
            .find(|(key, ..)| key.key().name() == name)
            .map(|(_, unit, description, value)| (*unit, description.clone(), value))
    };
    let (unit, help, value) = described("ratelimit_fallback_decisions_total").expect("exported");
    assert!(*value == DebugValue::Counter(0));
    assert!(unit.is_none());
    assert_eq!(
        help.unwrap().to_string(),
        "Decisions by a Redis store's fallback while Redis failed."
    );
    for kind in [
        "timeout",
        "never_sent",
        "connection_lost",
        "error_reply",
        "bad_reply",
    ] {
        let zero = snapshot.iter().any(|(key, _, _, value)| {
            let key = key.key();
            key.name() == "ratelimit_store_errors_total"
                && key.labels().any(|label| label.value() == kind)
                && *value == DebugValue::Counter(0)
        });
        assert!(zero, "no ratelimit_store_errors_total{{kind={kind}}} at 0");
    }
}

#[test]
fn waits_of_a_smoothed_burst_are_a_histogram_by_rule() {
    let metrics = recorded(async {
        // 4 per second, burst 1, waiting up to 250 ms, on a clock that stands still: the second
        // request waits 250 ms, the third would wait 500 ms and is refused.
        let store = tower_redis_ratelimit::MemoryStore::builder()
            .clock(tower_redis_ratelimit::clock::ManualClock::starting_now())
            .build();
        let rule = Rule::gcra("api", Quota::per_second(4).with_burst(1))
            .with_max_delay(Duration::from_millis(250));
        let app = app(RateLimitLayer::builder()
            .rule(rule)
            .key(HeaderKey::new("x-client"))
            .store(store)
            .build()
            .unwrap());
        let mut statuses = Vec::new();
        for _ in 0..3 {
            let (response, _) = timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
            statuses.push(response.status().as_u16());
        }
        assert_eq!(statuses, [200, 200, 429]);
    });
    assert_eq!(
        value(&metrics, "ratelimit_delay_seconds{plan=,rule=api}"),
        1
    );
    assert_eq!(
        value(
            &metrics,
            "ratelimit_decisions_total{outcome=allowed,plan=,rule=api}"
        ),
        2
    );
}
