//! Every key extractor end to end through an axum router: who is counted against which limit, what
//! a request without a key gets, and that forwarded addresses cannot be spoofed.
//!
//! Each app shares its `MemoryStore` with the test, which peeks (cost 0) at exact keys to prove
//! which key a request was counted against.
//!
//! By extractor: `header` (`HeaderKey`), `peer` (`ClientIp::peer`), `proxies`
//! (`ClientIp::behind_proxies`), and `extractors` (`UserId`, `GlobalKey`, closures, `or`,
//! `MissingKey::Skip`).

mod digests;
mod extractors;
mod header;
mod peer;
mod proxies;

use crate::support::{get as send, header, text};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Response, StatusCode};
use tower_redis_ratelimit::key::{Key, KeyExtractor};
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, Rule, Store};

/// Three requests per hour per key.
const LIMIT: u64 = 3;

fn rule() -> Rule {
    Rule::fixed_window("per-client", Quota::per_hour(LIMIT as u32))
}

fn layer(key: impl KeyExtractor, store: &MemoryStore) -> RateLimitLayer {
    RateLimitLayer::builder()
        .rule(rule())
        .key(key)
        .store(store.clone())
        .build()
        .unwrap()
}

fn app(key: impl KeyExtractor, store: &MemoryStore) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer(key, store))
}

/// How much of the quota `key` has used, without using any (a cost-0 peek).
async fn used(store: &MemoryStore, key: impl Into<Key>) -> u64 {
    let policy = Policy::try_from(rule()).unwrap();
    let decision = store.check(&key.into(), &policy, 0).await.unwrap();
    decision.used()
}

/// Sends one request and returns its status and `Rate-Limiting-Total-Requests`.
async fn hit(app: &Router, peer: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let response = send(app, "/", peer, headers).await;
    (
        response.status().as_u16(),
        header(&response, "rate-limiting-total-requests"),
    )
}

/// Asserts a 400 problem+json whose detail says exactly `why`, with the route's (static)
/// `RateLimit-Policy` and none of the headers that need a decision.
async fn assert_bad_request(response: Response<Body>, why: &str) {
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let policies: Vec<_> = response
        .headers()
        .get_all("ratelimit-policy")
        .iter()
        .collect();
    assert_eq!(policies, [r#""per-client";q=3;w=3600"#], "on a 400");
    for name in [
        "rate-limiting-state",
        "rate-limiting-total-requests",
        "rate-limiting-expires-at",
        "ratelimit",
        "retry-after",
    ] {
        assert_eq!(header(&response, name), "", "{name} on a 400");
    }
    let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "type": "about:blank",
            "title": "Bad Request",
            "status": 400,
            "detail": format!("This request cannot be rate limited: {why}."),
        })
    );
}
