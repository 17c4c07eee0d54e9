//! Responses with nothing to wait for or nothing to name: a request that can never pass (no
//! `Retry-After`, on both stores), and a custom store's decision about a rule the layer's policy
//! lacks.

use std::sync::Arc;
use std::time::Duration;

use super::{Env, T0, app, assert_expires_at, hello, memory, problem, redis, request, verdict};
use crate::support::header;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::store::StoreFuture;
use tower_redis_ratelimit::{Decision, Policy, Quota, Rule, Store};

async fn never_headers(env: Env) {
    let app = app(&env, &[hello()], HeaderFamilies::DEFAULT);
    let (response, before, after) = request(&app, &[("x-cost", "9")]).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after"), "", "retrying cannot help");
    assert_eq!(header(&response, "rate-limiting-state"), "Deny");
    assert_eq!(header(&response, "rate-limiting-total-requests"), "0");
    assert_eq!(header(&response, "ratelimit"), r#""hello";r=5;t=10"#);
    assert_expires_at(&response, before, after, Duration::from_secs(10));
    assert_eq!(
        problem(response).await,
        serde_json::json!({
            "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
            "title": "Request cannot be satisfied as assigned quota has been exceeded",
            "status": 429,
            "detail": "This request costs 9 but the rate limit \"hello\" (5 per 10s) admits at most 5 at once; it can never be allowed, so do not retry it.",
            "policy": "hello",
            "limit": 5,
            "violated-policies": ["hello"],
        })
    );
    // It consumed nothing.
    let (response, _, _) = request(&app, &[("x-cost", "5")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "5");
}

#[tokio::test]
async fn memory_never_admissible_has_no_retry_after() {
    never_headers(memory()).await;
}

#[tokio::test]
async fn redis_never_admissible_has_no_retry_after() {
    never_headers(redis()).await;
}

// ---------------------------------------------------------------------------------------------
// A custom store that reports a rule the layer's policy does not have.

/// Answers every check with `decision`, made by the store for a policy of its own.
struct ForeignDecisions {
    decision: Decision,
}

impl Store for ForeignDecisions {
    fn check(&self, _: &Key, _: &Policy, _: u32) -> StoreFuture<Decision> {
        StoreFuture::ready(Ok(self.decision.clone()))
    }
}

#[tokio::test]
async fn a_decision_about_a_rule_the_policy_lacks_is_reported_without_it() {
    // The store's policy has two rules and reports its second; the layer's has one.
    let stores_policy = Policy::new([
        Rule::fixed_window("store-a", Quota::per_minute(100)),
        Rule::fixed_window("store-b", Quota::per_minute(7)),
    ])
    .unwrap();
    let allowed = verdict(Outcome::Allowed, 90, 10, 30_000_000, 0);
    let cases = [
        (verdict(Outcome::Allowed, 2, 5, 30_000_000, 0), 200, ""),
        (
            verdict(Outcome::Denied, 0, 7, 30_000_000, 12_500_000),
            429,
            "13",
        ),
    ];
    for (reported, status, retry_after) in cases {
        let decision = Decision::from_verdicts(&stores_policy, &[allowed, reported]);
        assert_eq!(decision.rule_index(), 1);
        let env = Env {
            store: Arc::new(ForeignDecisions { decision }),
            clock: ManualClock::new(T0),
            _redis: None,
        };
        let app = app(&env, &[hello()], HeaderFamilies::ALL);
        let (response, before, after) = request(&app, &[]).await;
        assert_eq!(response.status(), status);
        // What does not need the rule is still told; `RateLimit` would have to name it.
        assert_eq!(header(&response, "ratelimit-policy"), r#""hello";q=5;w=10"#);
        assert_eq!(header(&response, "ratelimit"), "");
        assert_eq!(header(&response, "x-ratelimit-limit"), "7");
        assert_eq!(header(&response, "retry-after"), retry_after);
        assert_expires_at(&response, before, after, Duration::from_secs(30));
        if status == 429 {
            let body = problem(response).await;
            assert_eq!(
                body["detail"],
                "Rate limit exceeded. Retry after 13 seconds."
            );
        }
    }
}
