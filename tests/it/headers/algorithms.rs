//! Every header, exactly, through a whole fixed window, a GCRA bucket and a policy of several
//! rules, on both stores.

use std::time::Duration;

use tower_redis_ratelimit::{Decision, Policy, Quota, Rule};

use tower_redis_ratelimit::decision::Outcome;

use super::{
    Env, T0, X_RATELIMIT, app, assert_expires_at, assert_x_reset, hello, memory, present, problem,
    redis, request, verdict,
};
use crate::support::{header, text};
use tower_redis_ratelimit::respond::HeaderFamilies;

async fn fixed_window_headers(env: Env) {
    let app = app(&env, &[hello()], HeaderFamilies::DEFAULT);
    let policy = Policy::try_from(hello()).unwrap();
    for used in 1..=5u64 {
        let (response, before, after) = request(&app, &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string()
        );
        assert_eq!(header(&response, "rate-limiting-state"), "Allow");
        assert_expires_at(&response, before, after, Duration::from_secs(10));
        let policies: Vec<_> = response
            .headers()
            .get_all("ratelimit-policy")
            .iter()
            .collect();
        assert_eq!(policies, [r#""hello";q=5;w=10"#]);
        assert_eq!(
            header(&response, "ratelimit"),
            format!(r#""hello";r={};t=10"#, 5 - used)
        );
        assert_eq!(header(&response, "retry-after"), "");
        assert!(present(&response, &[&X_RATELIMIT]).is_empty());
        // The handler sees the decision that let the request in.
        let expected = Decision::from_verdicts(
            &policy,
            &[verdict(Outcome::Allowed, 5 - used, used, 10_000_000, 0)],
        );
        assert_eq!(text(response).await, format!("{expected:?}"));
    }

    // Denials at several points of the window: the wait is the rest of the window, in whole
    // seconds rounded up, at least 1.
    let window_end = T0 + 10_000_000;
    for (at, seconds) in [
        (T0 + 2_500_000, 8),
        (T0 + 3_000_000, 7),
        (T0 + 7_000_000, 3),
        (T0 + 7_000_001, 3),
        (T0 + 9_000_000, 1),
        (window_end - 1, 1),
    ] {
        env.clock.set(at);
        let (response, before, after) = request(&app, &[]).await;
        assert_eq!(response.status(), 429, "at +{} µs", at - T0);
        assert_eq!(header(&response, "rate-limiting-total-requests"), "5");
        assert_eq!(header(&response, "rate-limiting-state"), "Deny");
        // The exact rest of the window, not the `Retry-After` seconds it rounds up to.
        assert_expires_at(
            &response,
            before,
            after,
            Duration::from_micros(window_end - at),
        );
        assert_eq!(header(&response, "ratelimit-policy"), r#""hello";q=5;w=10"#);
        assert_eq!(
            header(&response, "ratelimit"),
            format!(r#""hello";r=0;t={seconds}"#)
        );
        assert_eq!(header(&response, "retry-after"), seconds.to_string());
        let plural = if seconds == 1 { "" } else { "s" };
        assert_eq!(
            problem(response).await,
            serde_json::json!({
                "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
                "title": "Request cannot be satisfied as assigned quota has been exceeded",
                "status": 429,
                "detail": format!(
                    "Rate limit \"hello\" (5 per 10s) exceeded. Retry after {seconds} second{plural}."
                ),
                "policy": "hello",
                "limit": 5,
                "retry_after": seconds,
                "violated-policies": ["hello"],
            })
        );
    }

    // The window ends: a new one starts with this request.
    env.clock.set(window_end);
    let (response, before, after) = request(&app, &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "1");
    assert_eq!(header(&response, "rate-limiting-state"), "Allow");
    assert_eq!(header(&response, "ratelimit"), r#""hello";r=4;t=10"#);
    assert_expires_at(&response, before, after, Duration::from_secs(10));
}

#[tokio::test]
async fn memory_fixed_window_headers_are_exact() {
    fixed_window_headers(memory()).await;
}

#[tokio::test]
async fn redis_fixed_window_headers_are_exact() {
    fixed_window_headers(redis()).await;
}

// ---------------------------------------------------------------------------------------------
// GCRA: the capacity is the burst, the window the time to refill it.

async fn gcra_headers(env: Env) {
    // 3 per 10 s, burst 3: one request drains every 3.333334 s (rounded up to the microsecond).
    let rule = Rule::gcra("burst", Quota::new(3, Duration::from_secs(10)));
    let app = app(&env, &[rule], HeaderFamilies::ALL);
    // When the bucket is empty again after each request: 1, 2 and 3 requests' worth of 10/3 s,
    // each rounded up to the microsecond; the denied fourth leaves it full.
    let resets = [3_333_334, 6_666_667, 10_000_000, 10_000_000].map(Duration::from_micros);
    let mut results = Vec::new();
    for reset in resets {
        let (response, before, after) = request(&app, &[]).await;
        assert_eq!(header(&response, "ratelimit-policy"), r#""burst";q=3;w=10"#);
        assert_eq!(header(&response, "x-ratelimit-limit"), "3");
        // X-RateLimit-Reset: Unix epoch seconds when the bucket is empty again.
        assert_x_reset(&response, before, after, reset);
        assert_expires_at(&response, before, after, reset);
        results.push((
            response.status().as_u16(),
            header(&response, "rate-limiting-total-requests"),
            header(&response, "ratelimit"),
            header(&response, "retry-after"),
            header(&response, "x-ratelimit-remaining"),
        ));
    }
    let statuses: Vec<_> = results.iter().map(|r| r.0).collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    let fields: Vec<_> = results
        .iter()
        .map(|r| (r.1.as_str(), r.2.as_str(), r.3.as_str(), r.4.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            // `t`: when the next request's worth drips back, 10/3 s after the last one, never
            // when the bucket is empty; on the refusal, the same wait as `Retry-After`.
            ("1", r#""burst";r=2;t=4"#, "", "2"),
            ("2", r#""burst";r=1;t=4"#, "", "1"),
            ("3", r#""burst";r=0;t=4"#, "", "0"),
            ("3", r#""burst";r=0;t=4"#, "4", "0"),
        ]
    );
    // Wait as told (4 s, more than the exact 3.333334 s): the next request passes.
    env.clock.advance(Duration::from_secs(4));
    let (response, _, _) = request(&app, &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "rate-limiting-state"), "Allow");
}

#[tokio::test]
async fn memory_gcra_headers_are_exact() {
    gcra_headers(memory()).await;
}

#[tokio::test]
async fn redis_gcra_headers_are_exact() {
    gcra_headers(redis()).await;
}

// ---------------------------------------------------------------------------------------------
// Several rules: the policy lists every rule, `RateLimit` reports the most restrictive.

async fn multi_rule_headers(env: Env) {
    let rules = [
        hello(),
        Rule::gcra("per-minute", Quota::per_minute(100).with_burst(10)),
    ];
    let app = app(&env, &rules, HeaderFamilies::DEFAULT);
    let policy = Policy::new(rules.clone()).unwrap();
    let (response, _, _) = request(&app, &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "ratelimit-policy"),
        r#""hello";q=5;w=10, "per-minute";q=10;w=6"#
    );
    // 4 left of 5 is fewer than 9 left of 10: the fixed window is reported.
    assert_eq!(header(&response, "ratelimit"), r#""hello";r=4;t=10"#);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "1");
    let expected = Decision::from_verdicts(
        &policy,
        &[
            verdict(Outcome::Allowed, 4, 1, 10_000_000, 0),
            // One request of a 100/min bucket drains in 0.6 s.
            verdict(Outcome::Allowed, 9, 1, 600_000, 0),
        ],
    );
    assert_eq!(text(response).await, format!("{expected:?}"));
    // A cost of 5 drains the window; the bucket still has 4 of 10 left after it.
    let (response, _, _) = request(&app, &[("x-cost", "5")]).await;
    assert_eq!(response.status(), 429, "1 + 5 > 5");
    assert_eq!(header(&response, "ratelimit"), r#""hello";r=4;t=10"#);
    assert_eq!(header(&response, "retry-after"), "10");
    let (response, _, _) = request(&app, &[("x-cost", "4")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "ratelimit"), r#""hello";r=0;t=10"#);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "5");
}

#[tokio::test]
async fn memory_multi_rule_headers_are_exact() {
    multi_rule_headers(memory()).await;
}

#[tokio::test]
async fn redis_multi_rule_headers_are_exact() {
    multi_rule_headers(redis()).await;
}
