//! Which header families a layer writes (only the chosen ones, on allowed, denied and unkeyed
//! responses), and GitHub's `X-RateLimit-*` exactly, on both stores.

use std::time::Duration;

use super::{
    Env, IETF, RATE_LIMITING, X_RATELIMIT, app, assert_expires_at, assert_x_reset, hello, memory,
    present, redis, request,
};
use crate::support::header;
use axum::body::Body;
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::{Quota, Rule};

async fn families(env: Env) {
    let everything: [&[&str]; 3] = [&RATE_LIMITING, &IETF, &X_RATELIMIT];
    let cases: [(HeaderFamilies, Vec<&str>); 5] = [
        (HeaderFamilies::NONE, vec![]),
        (HeaderFamilies::RATE_LIMITING, RATE_LIMITING.to_vec()),
        (HeaderFamilies::IETF, IETF.to_vec()),
        (HeaderFamilies::X_RATELIMIT, X_RATELIMIT.to_vec()),
        (
            HeaderFamilies::IETF | HeaderFamilies::X_RATELIMIT,
            [IETF.as_slice(), &X_RATELIMIT].concat(),
        ),
    ];
    for (index, (families, expected)) in cases.into_iter().enumerate() {
        // A rule per case, so each case starts with a fresh limit of one request.
        let rule = Rule::fixed_window(format!("case-{index}"), Quota::per_minute(1));
        let app = app(&env, &[rule], families);
        let (allowed, _, _) = request(&app, &[]).await;
        assert_eq!(allowed.status(), 200);
        assert_eq!(
            present(&allowed, &everything),
            expected,
            "{families:?} allowed"
        );
        assert_eq!(header(&allowed, "retry-after"), "");
        let (denied, _, _) = request(&app, &[]).await;
        assert_eq!(denied.status(), 429);
        assert_eq!(
            present(&denied, &everything),
            expected,
            "{families:?} denied"
        );
        // Whatever the families, a 429 says when to retry.
        assert_eq!(header(&denied, "retry-after"), "60", "{families:?}");
        // A request without a client address has no key: its 400 has no decision to report,
        // only the policy, and only when the IETF family is chosen.
        let request = http::Request::get("/").body(Body::empty()).unwrap();
        let unkeyed = tower::ServiceExt::oneshot(app.clone(), request)
            .await
            .unwrap();
        assert_eq!(unkeyed.status(), 400);
        let policy_only: Vec<_> = expected
            .iter()
            .filter(|name| **name == "ratelimit-policy")
            .map(|name| name.to_string())
            .collect();
        assert_eq!(
            present(&unkeyed, &everything),
            policy_only,
            "{families:?} without a key"
        );
        assert_eq!(header(&unkeyed, "retry-after"), "");
    }
}

#[tokio::test]
async fn memory_writes_only_the_chosen_families() {
    families(memory()).await;
}

#[tokio::test]
async fn redis_writes_only_the_chosen_families() {
    families(redis()).await;
}

// ---------------------------------------------------------------------------------------------
// GitHub style.

async fn x_ratelimit_headers(env: Env) {
    let app = app(&env, &[hello()], HeaderFamilies::ALL);
    for used in 1..=6u64 {
        let (response, before, after) = request(&app, &[]).await;
        let allowed = used <= 5;
        assert_eq!(response.status(), if allowed { 200 } else { 429 });
        assert_eq!(header(&response, "x-ratelimit-limit"), "5");
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            (5 - used.min(5)).to_string()
        );
        assert_eq!(
            header(&response, "x-ratelimit-used"),
            used.min(5).to_string()
        );
        // Unix epoch seconds of the end of the window.
        assert_x_reset(&response, before, after, Duration::from_secs(10));
        // Every family at once.
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.min(5).to_string()
        );
        assert_eq!(
            header(&response, "rate-limiting-state"),
            if allowed { "Allow" } else { "Deny" }
        );
        assert_expires_at(&response, before, after, Duration::from_secs(10));
        assert_eq!(header(&response, "ratelimit-policy"), r#""hello";q=5;w=10"#);
        assert_eq!(
            header(&response, "ratelimit"),
            format!(r#""hello";r={};t=10"#, 5 - used.min(5))
        );
        assert_eq!(
            header(&response, "retry-after"),
            if allowed { "" } else { "10" }
        );
    }
}

#[tokio::test]
async fn memory_x_ratelimit_headers_are_exact() {
    x_ratelimit_headers(memory()).await;
}

#[tokio::test]
async fn redis_x_ratelimit_headers_are_exact() {
    x_ratelimit_headers(redis()).await;
}
