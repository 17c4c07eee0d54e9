//! Every response header, exactly, on allowed and denied responses, for the memory store and for
//! a Redis store: seed 002's `Rate-Limiting-*`, the IETF draft-10 `RateLimit-Policy` and
//! `RateLimit`, GitHub's `X-RateLimit-*`, `Retry-After`, the problem+json body, and the
//! `Decision` a handler finds in its request extensions.
//!
//! Stores run on a `ManualClock`, so every duration is exact. `Rate-Limiting-Expires-At` and
//! `X-RateLimit-Reset` are wall-clock instants (now plus the store's duration, rounded up to the
//! second), checked against the system time read around the request: never before the real reset,
//! and less than a second after it.
//!
//! `algorithms`: the default families through a fixed window, a GCRA bucket and several rules;
//! `families`: which families appear, and GitHub's; `never`: a request that can never pass, and a
//! decision about a rule the policy lacks; `real_time`: the stores on their own clocks.

mod algorithms;
mod families;
mod follow;
mod never;
mod partition;
mod real_time;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::{RedisServer, get as send, header, text};
use axum::body::Body;
use axum::routing::get;
use axum::{Extension, Router};
use http::Response;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::{Outcome, RuleVerdict};
use tower_redis_ratelimit::key::ClientIp;
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::{
    Decision, MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store,
};

/// 2023-11-14T22:13:20Z: the stores' time. Headers with wall-clock instants use the system time.
const T0: u64 = 1_700_000_000_000_000;
const PEER: &str = "203.0.113.5:4000";

const RATE_LIMITING: [&str; 3] = [
    "rate-limiting-total-requests",
    "rate-limiting-state",
    "rate-limiting-expires-at",
];
const IETF: [&str; 2] = ["ratelimit-policy", "ratelimit"];
const X_RATELIMIT: [&str; 4] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-used",
    "x-ratelimit-reset",
];

/// A store on a manual clock; for Redis, the server that holds the state.
struct Env {
    store: Arc<dyn Store>,
    clock: ManualClock,
    _redis: Option<RedisServer>,
}

fn memory() -> Env {
    let clock = ManualClock::new(T0);
    Env {
        store: Arc::new(MemoryStore::builder().clock(clock.clone()).build()),
        clock,
        _redis: None,
    }
}

fn redis() -> Env {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = RedisStore::builder(&server.url())
        .clock(clock.clone())
        .build()
        .unwrap();
    Env {
        store: Arc::new(store),
        clock,
        _redis: Some(server),
    }
}

/// The handler reports the decision it found in its extensions.
async fn report(Extension(decision): Extension<Decision>) -> String {
    format!("{decision:?}")
}

fn app(env: &Env, rules: &[Rule], headers: HeaderFamilies) -> Router {
    let mut builder = RateLimitLayer::builder()
        .key(ClientIp::peer())
        .store(env.store.clone())
        .headers(headers)
        // Generous: the first Redis call connects, and debug builds on a busy machine are slow.
        .deadline(Duration::from_secs(5))
        .cost(|parts| {
            parts
                .headers
                .get("x-cost")
                .map_or(1, |cost| cost.to_str().unwrap().parse().unwrap())
        });
    for rule in rules {
        builder = builder.rule(rule.clone());
    }
    Router::new()
        .route("/", get(report))
        .layer(builder.build().unwrap())
}

fn hello() -> Rule {
    Rule::fixed_window("hello", Quota::new(5, Duration::from_secs(10)))
}

/// A request, with the system time read just before and after it.
async fn request(
    app: &Router,
    headers: &[(&str, &str)],
) -> (Response<Body>, SystemTime, SystemTime) {
    let before = SystemTime::now();
    let response = send(app, "/", PEER, headers).await;
    (response, before, SystemTime::now())
}

/// `Rate-Limiting-Expires-At` is RFC 3339 in UTC, whole seconds, `reset` after the decision,
/// which was made between `before` and `after`.
fn assert_expires_at(
    response: &Response<Body>,
    before: SystemTime,
    after: SystemTime,
    reset: Duration,
) {
    let value = header(response, "rate-limiting-expires-at");
    let bytes = value.as_bytes();
    assert_eq!(bytes.len(), 20, "{value}: YYYY-MM-DDTHH:MM:SSZ");
    for (index, &byte) in bytes.iter().enumerate() {
        let expected = match index {
            4 | 7 => b'-',
            10 => b'T',
            13 | 16 => b':',
            19 => b'Z',
            _ => {
                assert!(byte.is_ascii_digit(), "{value}");
                continue;
            }
        };
        assert_eq!(byte, expected, "{value}");
    }
    let at = humantime::parse_rfc3339(&value).unwrap();
    assert_rounded_up(at, before + reset, after + reset, &value);
}

/// `X-RateLimit-Reset` is in Unix epoch seconds, `reset` after the decision, which was made
/// between `before` and `after`.
fn assert_x_reset(
    response: &Response<Body>,
    before: SystemTime,
    after: SystemTime,
    reset: Duration,
) {
    let value = header(response, "x-ratelimit-reset");
    let seconds: u64 = value.parse().unwrap();
    let at = UNIX_EPOCH + Duration::from_secs(seconds);
    assert_rounded_up(at, before + reset, after + reset, &value);
}

/// The instant a header names, for a reset that happens between `earliest` and `latest`: rounded
/// up to the second, so never before the reset (a client that waits until then gets in), and
/// less than a second after it.
fn assert_rounded_up(at: SystemTime, earliest: SystemTime, latest: SystemTime, value: &str) {
    assert!(
        at >= earliest,
        "{value} is before the reset at {}",
        humantime::format_rfc3339_nanos(earliest)
    );
    assert!(
        at < latest + Duration::from_secs(1),
        "{value} is a second or more after the reset at {}",
        humantime::format_rfc3339_nanos(latest)
    );
}

/// The names of headers of the given families present on a response.
fn present(response: &Response<Body>, families: &[&[&str]]) -> Vec<String> {
    families
        .iter()
        .flat_map(|family| family.iter())
        .filter(|name| response.headers().contains_key(**name))
        .map(|name| (*name).to_owned())
        .collect()
}

fn verdict(
    outcome: Outcome,
    remaining: u64,
    used: u64,
    reset_us: u64,
    retry_us: u64,
) -> RuleVerdict {
    RuleVerdict::new(
        outcome,
        remaining,
        used,
        Duration::from_micros(reset_us),
        Duration::from_micros(retry_us),
    )
}

async fn problem(response: Response<Body>) -> serde_json::Value {
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    serde_json::from_str(&text(response).await).unwrap()
}
