//! One layer enforcing three quotas of three algorithms at once, on both stores: 10 per second
//! (GCRA), 20 per minute (sliding log) and 50 per hour (sliding window, six sub-intervals of
//! 10 minutes). A request passes only if it fits all three; a denied request consumes none of
//! them (the exact counts that pass afterwards prove it); `RateLimit` reports the most restrictive
//! rule and `RateLimit-Policy` lists every rule on every response.
//!
//! The same script runs against a `MemoryStore` and a `RedisStore`, each driven by a
//! `ManualClock`.

use std::time::Duration;

use crate::support::{RedisServer, get as send, header};
use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store};

/// 2023-11-14T00:00:00Z: the hour's sub-intervals start on it.
const T0: u64 = 1_699_920_000_000_000;
const PEER: &str = "198.51.100.4:5000";
const POLICY: &str = r#""second";q=10;w=1, "minute";q=20;w=60, "hour";q=50;w=3600"#;

fn app(store: impl Store) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(Rule::gcra("second", Quota::per_second(10)))
        .rule(Rule::sliding_log("minute", Quota::per_minute(20)))
        .rule(Rule::sliding_window("hour", Quota::per_hour(50), 6))
        .key(HeaderKey::new("x-client"))
        .store(store)
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

/// What one response said.
#[derive(Debug, PartialEq)]
struct Seen {
    status: StatusCode,
    ratelimit: String,
    retry_after: String,
    total: String,
}

async fn request(app: &Router) -> Seen {
    let response = send(app, "/", PEER, &[("x-client", "alice")]).await;
    assert_eq!(header(&response, "ratelimit-policy"), POLICY);
    Seen {
        status: response.status(),
        ratelimit: header(&response, "ratelimit"),
        retry_after: header(&response, "retry-after"),
        total: header(&response, "rate-limiting-total-requests"),
    }
}

fn allowed(ratelimit: &str, total: u64) -> Seen {
    Seen {
        status: StatusCode::OK,
        ratelimit: ratelimit.to_owned(),
        retry_after: String::new(),
        total: total.to_string(),
    }
}

fn denied(ratelimit: &str, total: u64, retry_after: u64) -> Seen {
    Seen {
        status: StatusCode::TOO_MANY_REQUESTS,
        ratelimit: ratelimit.to_owned(),
        retry_after: retry_after.to_string(),
        total: total.to_string(),
    }
}

/// Sends ten requests at the current time; each must pass and report as `report(k)` says for
/// the k-th (1-based).
async fn ten_allowed(app: &Router, report: impl Fn(u64) -> Seen) {
    for k in 1..=10 {
        assert_eq!(request(app).await, report(k), "request {k} of 10");
    }
}

async fn every_quota_is_enforced_at_once(app: Router, clock: ManualClock) {
    let at = |seconds: u64| clock.set(T0 + seconds * 1_000_000);

    // t = 0: the second's burst is the tightest quota.
    at(0);
    ten_allowed(&app, |k| {
        allowed(&format!(r#""second";r={};t=1"#, 10 - k), k)
    })
    .await;
    // The eleventh is over the second's quota: retry in 100 ms, i.e. 1 s.
    assert_eq!(request(&app).await, denied(r#""second";r=0;t=1"#, 10, 1));

    // t = 1 s: the burst is back. Exactly ten more pass, so the minute's log holds 20: the
    // denied request took nothing. With the second and the minute tied on remaining, the one
    // that resets later is reported.
    at(1);
    ten_allowed(&app, |k| {
        allowed(&format!(r#""minute";r={};t=60"#, 10 - k), 10 + k)
    })
    .await;
    // Over both the second and the minute: the longer wait wins, until the entries from t = 0
    // leave the log at 60 s; `t`, when more quota comes, is that wait.
    assert_eq!(request(&app).await, denied(r#""minute";r=0;t=59"#, 20, 59));

    // t = 60 s: the ten entries from t = 0 have left; again exactly ten pass (the denial at 1 s
    // added no entry).
    at(60);
    ten_allowed(&app, |k| {
        allowed(&format!(r#""minute";r={};t=60"#, 10 - k), 10 + k)
    })
    .await;
    assert_eq!(request(&app).await, denied(r#""minute";r=0;t=1"#, 20, 1));

    at(61);
    ten_allowed(&app, |k| {
        allowed(&format!(r#""minute";r={};t=60"#, 10 - k), 10 + k)
    })
    .await;

    // t = 120 s: 40 of the hour's 50 are used, so all three rules have 10 - k left: the hour
    // resets last (its sub-interval slides out entirely at 70 min).
    at(120);
    ten_allowed(&app, |k| {
        allowed(&format!(r#""hour";r={};t=4080"#, 10 - k), 40 + k)
    })
    .await;

    // t = 181 s: the second and the minute have room, the hour is full. Its 50 units slide out
    // from 60 min on; one unit fits once 49/50 of them remain, 12 s later: 3612 s.
    at(181);
    assert_eq!(
        request(&app).await,
        denied(r#""hour";r=0;t=3431"#, 50, 3_431)
    );
    at(3_611);
    assert_eq!(request(&app).await, denied(r#""hour";r=0;t=1"#, 50, 1));
    at(3_612);
    // Admitted: the hour now counts a unit in the current sub-interval, which slides out at 130 min.
    assert_eq!(request(&app).await, allowed(r#""hour";r=0;t=4188"#, 50));
}

#[tokio::test]
async fn every_quota_is_enforced_at_once_in_memory() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    every_quota_is_enforced_at_once(app(store), clock).await;
}

#[tokio::test]
async fn every_quota_is_enforced_at_once_in_redis() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = RedisStore::builder(&redis.url())
        .clock(clock.clone())
        .build()
        .unwrap();
    every_quota_is_enforced_at_once(app(store), clock).await;
    // One key per rule, all in the client's hash slot.
    let mut keys = redis.keys();
    keys.sort();
    assert_eq!(
        keys,
        [
            "ratelimit:hour:sw6-1h:{alice}",
            "ratelimit:minute:log-1m:{alice}",
            "ratelimit:second:gcra-10/1s:{alice}",
        ]
    );
}

/// A 429 names, in `violated-policies`, every rule the request would exceed, not only the one
/// its headers report: here the second's and the minute's, on both stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_names_every_violated_policy() {
    let redis = RedisServer::start();
    for store in [
        std::sync::Arc::new(MemoryStore::builder().clock(ManualClock::new(T0)).build())
            as std::sync::Arc<dyn Store>,
        std::sync::Arc::new(
            RedisStore::builder(&redis.url())
                .clock(ManualClock::new(T0))
                .denial_cache(0)
                .build()
                .unwrap(),
        ),
    ] {
        let layer = RateLimitLayer::builder()
            .rule(Rule::fixed_window("second", Quota::per_second(3)))
            .rule(Rule::fixed_window("minute", Quota::per_minute(3)))
            .rule(Rule::fixed_window("hour", Quota::per_hour(100)))
            .key(HeaderKey::new("x-client"))
            .store(store)
            .deadline(Duration::from_secs(2))
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        for _ in 0..3 {
            assert_eq!(request_status(&app).await, StatusCode::OK);
        }
        let refused = send(&app, "/", PEER, &[("x-client", "bob")]).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let body: serde_json::Value =
            serde_json::from_str(&crate::support::text(refused).await).unwrap();
        assert_eq!(
            body["type"],
            "https://iana.org/assignments/http-problem-types#quota-exceeded"
        );
        assert_eq!(
            body["violated-policies"],
            serde_json::json!(["second", "minute"])
        );
    }
}

async fn request_status(app: &Router) -> StatusCode {
    send(app, "/", PEER, &[("x-client", "bob")]).await.status()
}
