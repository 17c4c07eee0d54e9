//! Every response header, exactly, on allowed and denied responses, for the memory store and for
//! a Redis store: seed 002's `Rate-Limiting-*`, the IETF draft-10 `RateLimit-Policy` and
//! `RateLimit`, GitHub's `X-RateLimit-*`, `Retry-After`, the problem+json body, and the
//! `Decision` a handler finds in its request extensions.
//!
//! Stores run on a `ManualClock`, so every duration is exact. `Rate-Limiting-Expires-At` and
//! `X-RateLimit-Reset` are wall-clock instants (now plus the store's duration, rounded up to the
//! second), checked against the system time read around the request: never before the real reset,
//! and less than a second after it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::routing::get;
use axum::{Extension, Router};
use http::Response;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::concurrency::{Acquired, Lease, PermitId, Renewal, Slot};
use tower_redis_ratelimit::key::{ClientIp, Key};
use tower_redis_ratelimit::{
    Decision, Headers, MemoryStore, Outcome, Policy, Quota, RateLimitLayer, RedisStore, Rule,
    RuleVerdict, Store, StoreError, StoreFuture,
};

use crate::support::{RedisServer, get as send, header, text};

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

fn app(env: &Env, rules: &[Rule], headers: Headers) -> Router {
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

// ---------------------------------------------------------------------------------------------
// The default families through a whole fixed window.

async fn fixed_window_headers(env: Env) {
    let app = app(&env, &[hello()], Headers::DEFAULT);
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
                "type": "about:blank",
                "title": "Too Many Requests",
                "status": 429,
                "detail": format!(
                    "Rate limit \"hello\" (5 per 10s) exceeded. Retry after {seconds} second{plural}."
                ),
                "policy": "hello",
                "limit": 5,
                "retry_after": seconds,
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
    let app = app(&env, &[rule], Headers::ALL);
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
            ("1", r#""burst";r=2;t=4"#, "", "2"),
            ("2", r#""burst";r=1;t=7"#, "", "1"),
            ("3", r#""burst";r=0;t=10"#, "", "0"),
            ("3", r#""burst";r=0;t=10"#, "4", "0"),
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
    let app = app(&env, &rules, Headers::DEFAULT);
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

// ---------------------------------------------------------------------------------------------
// Which families appear.

async fn families(env: Env) {
    let everything: [&[&str]; 3] = [&RATE_LIMITING, &IETF, &X_RATELIMIT];
    let cases: [(Headers, Vec<&str>); 5] = [
        (Headers::NONE, vec![]),
        (Headers::RATE_LIMITING, RATE_LIMITING.to_vec()),
        (Headers::IETF, IETF.to_vec()),
        (Headers::X_RATELIMIT, X_RATELIMIT.to_vec()),
        (
            Headers::IETF | Headers::X_RATELIMIT,
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
    let app = app(&env, &[hello()], Headers::ALL);
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

// ---------------------------------------------------------------------------------------------
// A request that can never pass.

async fn never_headers(env: Env) {
    let app = app(&env, &[hello()], Headers::DEFAULT);
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
            "type": "about:blank",
            "title": "Too Many Requests",
            "status": 429,
            "detail": "This request costs 9 but the rate limit \"hello\" (5 per 10s) admits at most 5 at once; it can never be allowed, so do not retry it.",
            "policy": "hello",
            "limit": 5,
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
// On real time: the Redis store reads the server's clock, the memory store the system clock.

async fn real_time_headers(store: Arc<dyn Store>) {
    let env = Env {
        store,
        clock: ManualClock::new(T0),
        _redis: None,
    };
    let app = app(&env, &[hello()], Headers::DEFAULT);
    let start = std::time::Instant::now();
    // The window starts with the first request, so it ends 10 s after a moment between the
    // system times read around that request. The store keeps its own time (the memory store
    // advances a monotonic clock from one wall-clock reading, Redis reads `TIME`): allow them a
    // few milliseconds of disagreement with this process's wall clock.
    let skew = Duration::from_millis(5);
    let mut window_end = None;
    for used in 1..=5u64 {
        let (response, before, after) = request(&app, &[]).await;
        let (earliest, latest) = *window_end.get_or_insert((
            before + Duration::from_secs(10) - skew,
            after + Duration::from_secs(10) + skew,
        ));
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string()
        );
        // Less than 10 s remain (at most 10 s for the first request), rounded up: 10.
        assert_eq!(
            header(&response, "ratelimit"),
            format!(r#""hello";r={};t=10"#, 5 - used)
        );
        assert_window_end(&response, earliest, latest);
    }
    let (earliest, latest) = window_end.unwrap();
    let (response, _, _) = request(&app, &[]).await;
    let elapsed = start.elapsed();
    assert_eq!(response.status(), 429);
    let retry: u64 = header(&response, "retry-after").parse().unwrap();
    // The rest of the window, rounded up: 10 s minus what has passed since the first request.
    let lowest = (Duration::from_secs(10) - elapsed).as_secs();
    assert!((lowest..=10).contains(&retry), "{retry} after {elapsed:?}");
    assert_window_end(&response, earliest, latest);
    assert_eq!(
        header(&response, "ratelimit"),
        format!(r#""hello";r=0;t={retry}"#)
    );
}

/// `Rate-Limiting-Expires-At` names the end of a window that ends between `earliest` and `latest`.
fn assert_window_end(response: &Response<Body>, earliest: SystemTime, latest: SystemTime) {
    let value = header(response, "rate-limiting-expires-at");
    let at = humantime::parse_rfc3339(&value).unwrap();
    assert_rounded_up(at, earliest, latest, &value);
}

#[tokio::test]
async fn memory_headers_on_the_system_clock() {
    real_time_headers(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn redis_headers_on_the_server_clock() {
    let server = RedisServer::start();
    real_time_headers(Arc::new(RedisStore::open(&server.url()).unwrap())).await;
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

    fn acquire(&self, _: &Slot, _: PermitId, _: u32, _: Lease) -> StoreFuture<Acquired> {
        StoreFuture::ready(Err(StoreError::Protocol("no permits here".into())))
    }

    fn release(&self, _: &Slot, _: PermitId) -> StoreFuture<bool> {
        StoreFuture::ready(Err(StoreError::Protocol("no permits here".into())))
    }

    fn renew(&self, _: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        StoreFuture::ready(Err(StoreError::Protocol("no permits here".into())))
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
        let app = app(&env, &[hello()], Headers::ALL);
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
