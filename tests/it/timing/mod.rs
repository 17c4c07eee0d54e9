//! Time-dependent behaviour of the memory store on a `ManualClock`: no sleeps, exact to the
//! microsecond. Window resets, GCRA bursts and spacing, retry times a client can rely on, requests
//! that can never pass, and cost-0 peeks.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::{ClientIp, Key};
use tower_redis_ratelimit::{
    Decision, MemoryStore, Outcome, Policy, Quota, RateLimitLayer, Rule, RuleVerdict, Store,
};

use crate::support::{get as send, header, text};

mod agreement;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const PEER: &str = "203.0.113.5:4000";

fn setup() -> (MemoryStore, ManualClock) {
    let clock = ManualClock::new(T0);
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

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

async fn check(store: &MemoryStore, key: &str, policy: &Policy, cost: u32) -> Decision {
    store.check(&Key::from(key), policy, cost).await.unwrap()
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

// ---------------------------------------------------------------------------------------------
// Fixed window

#[tokio::test]
async fn fixed_window_resets_exactly_at_the_end_of_the_window() {
    let (store, clock) = setup();
    let policy = fixed_window();
    // The window starts with the key's first request (3.25 s past a whole second), not at an
    // epoch-aligned boundary.
    let start = T0 + 3_250_000;
    clock.set(start);
    for used in 1..=5 {
        assert_eq!(
            check(&store, "k", &policy, 1).await,
            expect(&policy, Outcome::Allowed, 5 - used, used, 10_000_000, 0)
        );
    }
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        expect(&policy, Outcome::Denied, 0, 5, 10_000_000, 10_000_000)
    );
    // Denials during the window say how long is left, and do not move the window.
    for at in [1_000_000, 5_000_000, 9_999_000] {
        clock.set(start + at);
        let left = 10_000_000 - at;
        assert_eq!(
            check(&store, "k", &policy, 1).await,
            expect(&policy, Outcome::Denied, 0, 5, left, left)
        );
    }
    // One microsecond before the end: still denied, with 1 µs to wait.
    clock.set(start + 10_000_000 - 1);
    let denied = check(&store, "k", &policy, 1).await;
    assert_eq!(denied, expect(&policy, Outcome::Denied, 0, 5, 1, 1));
    assert_eq!(denied.retry_after(), Some(micros(1)));
    // At the end exactly: a new window, starting now.
    clock.advance(micros(1));
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
    clock.advance(micros(9_999_999));
    assert_eq!(
        check(&store, "k", &policy, 4).await,
        expect(&policy, Outcome::Allowed, 0, 5, 1, 0)
    );
    clock.advance(micros(1));
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
}

#[tokio::test]
async fn each_key_has_its_own_window() {
    let (store, clock) = setup();
    let policy = fixed_window();
    assert!(check(&store, "a", &policy, 5).await.is_allowed());
    clock.advance(Duration::from_secs(4));
    assert!(check(&store, "b", &policy, 5).await.is_allowed());
    clock.advance(Duration::from_secs(6));
    // a's window ended now; b's has 4 s to go.
    assert_eq!(
        check(&store, "a", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
    assert_eq!(
        check(&store, "b", &policy, 1).await,
        expect(&policy, Outcome::Denied, 0, 5, 4_000_000, 4_000_000)
    );
}

// ---------------------------------------------------------------------------------------------
// GCRA

#[tokio::test]
async fn gcra_admits_the_burst_back_to_back_then_refuses() {
    let (store, _clock) = setup();
    let policy = gcra();
    let decisions = [
        check(&store, "k", &policy, 1).await,
        check(&store, "k", &policy, 1).await,
        check(&store, "k", &policy, 1).await,
        check(&store, "k", &policy, 1).await,
    ];
    assert_eq!(
        decisions,
        [
            // The bucket empties 10/3 s per request, rounded up to the microsecond.
            expect(&policy, Outcome::Allowed, 2, 1, 3_333_334, 0),
            expect(&policy, Outcome::Allowed, 1, 2, 6_666_667, 0),
            expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0),
            expect(&policy, Outcome::Denied, 0, 3, 10_000_000, 3_333_334),
        ]
    );
}

#[tokio::test]
async fn gcra_spaces_requests_one_per_ten_thirds_of_a_second_after_the_burst() {
    let (store, clock) = setup();
    let policy = gcra();
    for _ in 0..3 {
        assert!(check(&store, "k", &policy, 1).await.is_allowed());
    }
    // A greedy client: on every denial it waits one microsecond less than told (still denied),
    // then the last microsecond (admitted).
    let mut admitted_at = Vec::new();
    while admitted_at.len() < 9 {
        let denied = check(&store, "k", &policy, 1).await;
        assert_eq!(denied.outcome(), Outcome::Denied);
        let wait = denied.retry_after().unwrap();
        assert!(wait > Duration::ZERO);
        clock.advance(wait - micros(1));
        let early = check(&store, "k", &policy, 1).await;
        assert_eq!(early.outcome(), Outcome::Denied, "1 µs early");
        assert_eq!(early.retry_after(), Some(micros(1)));
        clock.advance(micros(1));
        let admitted = check(&store, "k", &policy, 1).await;
        assert!(admitted.is_allowed(), "after waiting {wait:?}");
        assert_eq!(admitted.remaining(), 0);
        admitted_at.push(clock_now(&clock) - T0);
    }
    // The k-th request after the burst passes at ceil(k * 10 s / 3): one per 10/3 s, no drift.
    let expected: Vec<u64> = (1..=9u64).map(|k| (k * 10_000_000).div_ceil(3)).collect();
    assert_eq!(admitted_at, expected);
    assert_eq!(admitted_at[2], 10_000_000, "3 more per 10 s");
    assert_eq!(admitted_at[8], 30_000_000);
}

fn clock_now(clock: &ManualClock) -> u64 {
    use tower_redis_ratelimit::clock::Clock;
    clock.now_micros()
}

#[tokio::test]
async fn gcra_refills_completely_after_its_window() {
    let (store, clock) = setup();
    let policy = gcra();
    assert!(check(&store, "k", &policy, 3).await.is_allowed());
    clock.advance(micros(10_000_000 - 1));
    // 1 µs before the bucket is empty: 3 units of 1/10^7 request remain, so a burst of 3 does
    // not fit yet (2 would).
    let almost = check(&store, "k", &policy, 3).await;
    assert_eq!(almost, expect(&policy, Outcome::Denied, 2, 1, 1, 1));
    clock.advance(micros(1));
    assert_eq!(
        check(&store, "k", &policy, 3).await,
        expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0)
    );
}

fn app(store: &MemoryStore, rule: Rule, cost: u32) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(rule)
        .key(ClientIp::peer())
        .store(store.clone())
        .cost(move |_| cost)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

#[tokio::test]
async fn retry_after_header_is_enough_and_rounded_up() {
    let (store, clock) = setup();
    let app = app(
        &store,
        Rule::gcra("gcra", Quota::new(3, Duration::from_secs(10))),
        1,
    );
    for _ in 0..3 {
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
    // 3.333334 s to wait: told 4.
    let denied = send(&app, "/", PEER, &[]).await;
    assert_eq!(denied.status(), 429);
    assert_eq!(header(&denied, "retry-after"), "4");
    let body: serde_json::Value = serde_json::from_str(&text(denied).await).unwrap();
    assert_eq!(body["retry_after"], 4);
    // Retrying a second early (3 s) is too early: 0.333334 s remain, told 1.
    clock.advance(Duration::from_secs(3));
    let early = send(&app, "/", PEER, &[]).await;
    assert_eq!(early.status(), 429);
    assert_eq!(header(&early, "retry-after"), "1");
    // Waiting as told gets in.
    clock.advance(Duration::from_secs(1));
    assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);

    // Whenever it is told to wait, a client that waits exactly as long gets in.
    clock.advance(Duration::from_secs(1_000));
    for _ in 0..3 {
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
    for _ in 0..5 {
        let denied = send(&app, "/", PEER, &[]).await;
        assert_eq!(denied.status(), 429);
        let seconds: u64 = header(&denied, "retry-after").parse().unwrap();
        assert!(seconds >= 1);
        clock.advance(Duration::from_secs(seconds));
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
}

#[tokio::test]
async fn retry_after_is_at_least_one_second() {
    let (store, clock) = setup();
    let app = app(
        &store,
        Rule::fixed_window("fw", Quota::new(1, Duration::from_millis(10))),
        1,
    );
    assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    clock.advance(micros(9_999));
    let denied = send(&app, "/", PEER, &[]).await;
    assert_eq!(denied.status(), 429);
    // 1 µs to wait, told 1 s.
    assert_eq!(header(&denied, "retry-after"), "1");
}

// ---------------------------------------------------------------------------------------------
// Cost larger than the burst: never.

#[tokio::test]
async fn cost_above_the_burst_can_never_pass() {
    let (store, _clock) = setup();
    let policy = gcra();
    let never = check(&store, "k", &policy, 4).await;
    assert_eq!(never, expect(&policy, Outcome::Never, 3, 0, 0, 0));
    assert_eq!(never.retry_after(), None);
    assert!(!never.is_allowed());
    // It consumed nothing: the whole burst is still there.
    assert_eq!(
        check(&store, "k", &policy, 3).await,
        expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0)
    );
    // Never, not Denied, even when the bucket is full: waiting would not help.
    assert_eq!(
        check(&store, "k", &policy, 4).await,
        expect(&policy, Outcome::Never, 0, 3, 10_000_000, 0)
    );
    // The burst bounds it, not the rate: 10 per second with a burst of 4 never admits 5 at once.
    let policy = Policy::try_from(Rule::gcra("b4", Quota::per_second(10).with_burst(4))).unwrap();
    assert_eq!(
        check(&store, "k", &policy, 5).await.outcome(),
        Outcome::Never
    );
    assert_eq!(
        check(&store, "k", &policy, 4).await.outcome(),
        Outcome::Allowed
    );
    // Fixed window: a cost above the limit.
    let policy = fixed_window();
    assert_eq!(
        check(&store, "k", &policy, 6).await,
        expect(&policy, Outcome::Never, 5, 0, 10_000_000, 0)
    );
    assert_eq!(store.len(), 1, "only the admitted requests wrote state");
}

#[tokio::test]
async fn a_never_admissible_request_gets_a_429_without_retry_after() {
    let (store, _clock) = setup();
    let app = app(
        &store,
        Rule::gcra("gcra", Quota::new(3, Duration::from_secs(10))),
        4,
    );
    for _ in 0..3 {
        let response = send(&app, "/", PEER, &[]).await;
        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "retry-after"), "");
        assert_eq!(header(&response, "rate-limiting-state"), "Deny");
        let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
        assert!(body.get("retry_after").is_none(), "{body}");
        assert_eq!(
            body["detail"],
            "This request costs 4 but the rate limit \"gcra\" (3 per 10s) admits at most 3 at once; \
             it can never be allowed, so do not retry it."
        );
    }
    assert_eq!(store.len(), 0);
}

// ---------------------------------------------------------------------------------------------
// Cost 0: a peek that reports without consuming or writing.

#[tokio::test]
async fn cost_zero_peeks_at_a_fixed_window_without_consuming() {
    let (store, clock) = setup();
    let policy = fixed_window();
    // Nothing stored yet: the full quota, and still nothing stored.
    assert_eq!(
        check(&store, "k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 5, 0, 10_000_000, 0)
    );
    assert_eq!(store.len(), 0);
    // A peek does not start the window: the first real request, 5 s later, does.
    clock.advance(Duration::from_secs(5));
    assert!(check(&store, "k", &policy, 2).await.is_allowed());
    clock.advance(Duration::from_secs(3));
    for _ in 0..10 {
        assert_eq!(
            check(&store, "k", &policy, 0).await,
            expect(&policy, Outcome::Allowed, 3, 2, 7_000_000, 0)
        );
    }
    assert_eq!(
        check(&store, "k", &policy, 3).await,
        expect(&policy, Outcome::Allowed, 0, 5, 7_000_000, 0)
    );
    // A peek at a spent window reports it (nothing left) but is not itself refused.
    assert_eq!(
        check(&store, "k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 0, 5, 7_000_000, 0)
    );
    assert_eq!(
        check(&store, "k", &policy, 1).await.outcome(),
        Outcome::Denied
    );
}

#[tokio::test]
async fn cost_zero_peeks_at_a_gcra_bucket_without_consuming() {
    let (store, clock) = setup();
    let policy = gcra();
    assert_eq!(
        check(&store, "k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 3, 0, 0, 0)
    );
    assert!(check(&store, "k", &policy, 2).await.is_allowed());
    for _ in 0..10 {
        assert_eq!(
            check(&store, "k", &policy, 0).await,
            expect(&policy, Outcome::Allowed, 1, 2, 6_666_667, 0)
        );
    }
    // Time passes between peeks: they see the bucket drain, and leave it as it was.
    clock.advance(micros(1_000_000));
    assert_eq!(
        check(&store, "k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 1, 2, 5_666_667, 0)
    );
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 0, 3, 9_000_000, 0)
    );
}

#[tokio::test]
async fn a_report_only_layer_with_cost_zero_shows_the_enforcing_layers_state() {
    let (store, _clock) = setup();
    let rule = Rule::fixed_window("fw", Quota::new(5, Duration::from_secs(10)));
    let enforce = app(&store, rule.clone(), 1);
    // Same store, same rule, same key, cost 0: reports and never refuses.
    let report = app(&store, rule, 0);
    for _ in 0..2 {
        assert_eq!(send(&enforce, "/", PEER, &[]).await.status(), 200);
    }
    for _ in 0..10 {
        let response = send(&report, "/", PEER, &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "rate-limiting-total-requests"), "2");
        assert_eq!(header(&response, "ratelimit"), r#""fw";r=3;t=10"#);
    }
    for _ in 0..3 {
        assert_eq!(send(&enforce, "/", PEER, &[]).await.status(), 200);
    }
    assert_eq!(send(&enforce, "/", PEER, &[]).await.status(), 429);
    let response = send(&report, "/", PEER, &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "5");
    assert_eq!(header(&response, "ratelimit"), r#""fw";r=0;t=10"#);
}

// ---------------------------------------------------------------------------------------------
// Several rules: all or nothing.

#[tokio::test]
async fn a_request_denied_by_one_rule_consumes_none() {
    let (store, clock) = setup();
    let policy = Policy::new([
        Rule::fixed_window("short", Quota::new(2, Duration::from_secs(1))),
        Rule::fixed_window("long", Quota::per_hour(3)),
    ])
    .unwrap();
    let allowed = |short: (u64, u64, u64), long: (u64, u64, u64)| {
        Decision::from_verdicts(
            &policy,
            &[
                RuleVerdict::new(
                    Outcome::Allowed,
                    short.0,
                    short.1,
                    micros(short.2),
                    Duration::ZERO,
                ),
                RuleVerdict::new(
                    Outcome::Allowed,
                    long.0,
                    long.1,
                    micros(long.2),
                    Duration::ZERO,
                ),
            ],
        )
    };
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        allowed((1, 1, 1_000_000), (2, 1, 3_600_000_000))
    );
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        allowed((0, 2, 1_000_000), (1, 2, 3_600_000_000))
    );
    // "short" refuses; "long" is not charged for it.
    let denied = check(&store, "k", &policy, 1).await;
    assert_eq!(denied.outcome(), Outcome::Denied);
    assert_eq!(denied.rule_index(), 0);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        check(&store, "k", &policy, 1).await,
        allowed((1, 1, 1_000_000), (0, 3, 3_599_000_000))
    );
    // Now "long" refuses and "short" is not charged: after it, short still has 1 left.
    let denied = check(&store, "k", &policy, 1).await;
    assert_eq!(denied.rule_index(), 1);
    assert_eq!(denied.retry_after(), Some(micros(3_599_000_000)));
    assert_eq!(
        check(&store, "k", &policy, 0).await,
        allowed((1, 1, 1_000_000), (0, 3, 3_599_000_000))
    );
}
