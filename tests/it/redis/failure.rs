//! What a layer does when its Redis goes away, and how it comes back: fail open (the default),
//! fail closed, recovery after a restart, and a Redis that is not there when the service starts.
//!
//! Every test runs its own `redis-server` and kills or restarts it. Time bounds are generous (a
//! shared, noisy machine) but far below what a hang would take.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, header, text, timed_get};
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{Decision, Quota, RateLimitLayer, RedisStore, Rule};

const PEER: &str = "203.0.113.7:4000";
/// Slack on top of a deadline for timer and scheduling delays on a busy machine: small enough
/// that a deadline missed by more than its own length fails, where a hang exceeds it by far.
const SLACK: Duration = Duration::from_millis(150);
/// How long a restarted server may take to be used again: the reconnect backoff is at most 1 s.
const RECOVERY: Duration = Duration::from_secs(5);

/// A router whose single route is limited per `x-client` header, with a counter of the requests
/// that reached the handler.
fn app(
    redis: &RedisServer,
    quota: Quota,
    failure: FailureMode,
    deadline: Duration,
) -> (Router, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", quota))
        .key(HeaderKey::new("x-client"))
        .store(RedisStore::open(&redis.url()).unwrap())
        .failure_mode(failure)
        .deadline(deadline)
        .build()
        .unwrap();
    let counter = calls.clone();
    let router = Router::new()
        .route(
            "/",
            get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { "ok" }
            }),
        )
        .layer(layer);
    (router, calls)
}

/// Sends one request as `client` and returns its status, its `Rate-Limiting-State` and how long
/// it took.
async fn send(app: &Router, client: &str) -> (StatusCode, String, Duration) {
    let (response, took) = timed_get(app, "/", PEER, &[("x-client", client)]).await;
    (
        response.status(),
        header(&response, "rate-limiting-state"),
        took,
    )
}

/// Uses up `client`'s quota of `limit` and checks the next request is refused: limiting works.
async fn assert_enforced(app: &Router, client: &str, limit: u64) {
    for used in 1..=limit {
        let (response, _) = timed_get(app, "/", PEER, &[("x-client", client)]).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "request {used} of {client}"
        );
        assert_eq!(header(&response, "rate-limiting-state"), "Allow");
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string(),
            "request {used} of {client}"
        );
    }
    let (response, _) = timed_get(app, "/", PEER, &[("x-client", client)]).await;
    assert_eq!(
        response.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "request {} of {client}",
        limit + 1
    );
    assert_eq!(header(&response, "rate-limiting-state"), "Deny");
}

/// Sends requests as `client` until one is counted by Redis again (`Rate-Limiting-State: Allow`),
/// for at most [`RECOVERY`]; returns how long that took.
async fn wait_until_counted(app: &Router, client: &str) -> Duration {
    let started = Instant::now();
    loop {
        let (status, state, _) = send(app, client).await;
        if state == "Allow" {
            assert_eq!(status, StatusCode::OK);
            return started.elapsed();
        }
        assert!(
            started.elapsed() < RECOVERY,
            "limiting did not resume within {RECOVERY:?} (last answer: {status} {state:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Checks what a response without a decision carries: the layer's `RateLimit-Policy` (static, so
/// it is sent even when the store cannot decide), and none of the headers that need a decision.
fn assert_undecided_headers<B>(response: &http::Response<B>, policy: &str) {
    assert_eq!(header(response, "ratelimit-policy"), policy);
    for name in [
        "rate-limiting-total-requests",
        "rate-limiting-expires-at",
        "ratelimit",
    ] {
        assert_eq!(header(response, name), "", "{name} without a decision");
    }
}

/// Checks a fail-closed rejection: 503, `Retry-After` in whole seconds (at least 1), a
/// problem+json body that says the status, and the layer's `policy`.
async fn assert_unavailable(response: http::Response<axum::body::Body>, policy: &str) {
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_undecided_headers(&response, policy);
    assert_eq!(header(&response, "rate-limiting-state"), "");
    let retry_after = header(&response, "retry-after");
    let seconds: u64 = retry_after
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After is not whole seconds: {retry_after:?}"));
    assert!(seconds >= 1, "Retry-After: {seconds}");
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(body["status"], 503, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

/// Fail open, the default: with Redis killed, every request (including concurrent ones) reaches
/// the service, is marked `Skipped`, and is answered within the deadline plus slack; except a
/// client that Redis denied before it died, whose denial the store remembers until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_passes_requests_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let deadline = Duration::from_millis(100);
    let (app, calls) = app(&redis, Quota::per_hour(2), FailureMode::default(), deadline);
    assert_enforced(&app, "alice", 2).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    redis.kill();
    let (status, state, took) = send(&app, "alice").await;
    assert_eq!(
        (status, state.as_str()),
        (StatusCode::TOO_MANY_REQUESTS, "Deny")
    );
    assert!(took < SLACK, "a remembered denial took {took:?}");
    for i in 0..20 {
        let (response, took) = timed_get(&app, "/", PEER, &[("x-client", "bob")]).await;
        assert_eq!(response.status(), StatusCode::OK, "request {i}");
        assert_eq!(header(&response, "rate-limiting-state"), "Skipped");
        assert_undecided_headers(&response, r#""api";q=2;w=3600"#);
        assert!(took < deadline + SLACK, "request {i} took {took:?}");
        assert_eq!(text(response).await, "ok");
    }
    let concurrent: Vec<_> = (0..50)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move { send(&app, &format!("client-{i}")).await })
        })
        .collect();
    for request in concurrent {
        let (status, state, took) = request.await.unwrap();
        assert_eq!((status, state.as_str()), (StatusCode::OK, "Skipped"));
        assert!(
            took < deadline + SLACK,
            "a concurrent request took {took:?}"
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2 + 20 + 50);
}

/// A request that failed open passed unchecked, so it has no `Decision` in its extensions. A
/// handler that takes it as an `Option` (as the docs show) keeps answering while Redis is down;
/// one that requires it gets axum's 500, which would turn the outage into an outage of the route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_taking_the_decision_as_an_option_answers_while_failing_open() {
    async fn optional(decision: Option<Extension<Decision>>) -> String {
        match decision {
            Some(Extension(decision)) => format!("{} left", decision.remaining()),
            None => "not limited right now".to_owned(),
        }
    }
    async fn required(Extension(decision): Extension<Decision>) -> String {
        format!("{} left", decision.remaining())
    }
    let mut redis = RedisServer::start();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_hour(5)))
        .key(HeaderKey::new("x-client"))
        .store(RedisStore::open(&redis.url()).unwrap())
        // Generous: the first call connects, on a busy machine.
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/optional", get(optional))
        .route("/required", get(required))
        .layer(layer);
    let client = [("x-client", "gina")];

    let (response, _) = timed_get(&app, "/optional", PEER, &client).await;
    assert_eq!(header(&response, "rate-limiting-state"), "Allow");
    assert_eq!(text(response).await, "4 left");
    let (response, _) = timed_get(&app, "/required", PEER, &client).await;
    assert_eq!(text(response).await, "3 left");

    redis.kill();
    let (response, _) = timed_get(&app, "/optional", PEER, &client).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "rate-limiting-state"), "Skipped");
    assert_eq!(text(response).await, "not limited right now");
    let (response, _) = timed_get(&app, "/required", PEER, &client).await;
    assert_eq!(header(&response, "rate-limiting-state"), "Skipped");
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
}

/// A dead Redis costs no waiting: connection refused is noticed at once and the reconnect backoff
/// fails the calls in between immediately, so with a long deadline requests still pass quickly
/// instead of each waiting the deadline out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_fails_fast_rather_than_at_the_deadline() {
    let mut redis = RedisServer::start();
    let deadline = Duration::from_secs(3);
    let (app, _) = app(&redis, Quota::per_hour(10), FailureMode::Open, deadline);
    assert_eq!(send(&app, "bob").await.1, "Allow");

    redis.kill();
    let fast = Duration::from_millis(500);
    let started = Instant::now();
    // Long enough to go through several reconnect attempts (backoff 50 ms, doubling).
    while started.elapsed() < Duration::from_millis(1500) {
        let (status, state, took) = send(&app, "bob").await;
        assert_eq!((status, state.as_str()), (StatusCode::OK, "Skipped"));
        assert!(
            took < fast,
            "a request took {took:?} (deadline {deadline:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Fail closed: with Redis killed, requests are refused with 503, `Retry-After` and a
/// problem+json body, without reaching the service, and without hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_refuses_requests_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let deadline = Duration::from_millis(100);
    let (app, calls) = app(&redis, Quota::per_hour(5), FailureMode::Closed, deadline);
    assert_eq!(send(&app, "carol").await.1, "Allow");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    redis.kill();
    for i in 0..20 {
        let (response, took) = timed_get(&app, "/", PEER, &[("x-client", "carol")]).await;
        assert!(took < deadline + SLACK, "request {i} took {took:?}");
        assert_unavailable(response, r#""api";q=5;w=3600"#).await;
    }
    let concurrent: Vec<_> = (0..30)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                timed_get(&app, "/", PEER, &[("x-client", &format!("client-{i}"))]).await
            })
        })
        .collect();
    for request in concurrent {
        let (response, took) = request.await.unwrap();
        assert!(
            took < deadline + SLACK,
            "a concurrent request took {took:?}"
        );
        assert_unavailable(response, r#""api";q=5;w=3600"#).await;
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "no refused request reached the service"
    );
}

/// After a crash and a restart (same port, empty server), the same layer and store start counting
/// again by themselves, against the new server, and enforce the quota exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiting_resumes_after_redis_restarts() {
    for failure in [FailureMode::Open, FailureMode::Closed] {
        let mut redis = RedisServer::start();
        let (app, _) = app(
            &redis,
            Quota::per_hour(3),
            failure,
            Duration::from_millis(100),
        );
        assert_enforced(&app, "before", 3).await;

        redis.kill();
        // Several failures in a row, so the store is backing off when the server returns.
        for _ in 0..10 {
            let (status, _, _) = send(&app, "during").await;
            let expected = match failure {
                FailureMode::Closed => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::OK,
            };
            assert_eq!(status, expected, "{failure:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        redis.restart();
        wait_until_counted(&app, "probe").await;
        // The new server is empty. This process remembered that "before" was denied until its
        // window ends; once it hears resets again (its subscription broke with the server) it
        // forgets what it remembered, and asks the new server, which admits it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (status, state, _) = send(&app, "before").await;
            if (status, state.as_str()) == (StatusCode::OK, "Allow") {
                break;
            }
            assert_eq!(
                (status, state.as_str()),
                (StatusCode::TOO_MANY_REQUESTS, "Deny"),
                "{failure:?}: remembered until then"
            );
            assert!(
                tokio::time::Instant::now() < deadline,
                "{failure:?}: the remembered denial outlived the old server by 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A fresh client gets exactly its quota, counted in the new server.
        assert_enforced(&app, "after", 3).await;
        assert_eq!(
            redis.cli(&["HGET", "ratelimit:api:fw-1h:{after}", "n"]),
            "3",
            "{failure:?}"
        );
    }
}

/// One store lives through many outages: each restart is noticed and used again (the store does
/// not run out of connections or stay in its backoff), and each new server enforces the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiting_resumes_after_every_one_of_repeated_outages() {
    let mut redis = RedisServer::start();
    let deadline = Duration::from_millis(100);
    let (app, _) = app(&redis, Quota::per_hour(2), FailureMode::Open, deadline);
    for cycle in 0..4 {
        assert_enforced(&app, &format!("cycle-{cycle}"), 2).await;
        redis.kill();
        for _ in 0..5 {
            let (status, state, took) = send(&app, "down").await;
            assert_eq!(
                (status, state.as_str()),
                (StatusCode::OK, "Skipped"),
                "cycle {cycle}"
            );
            assert!(took < deadline + SLACK, "cycle {cycle}: took {took:?}");
        }
        redis.restart();
        wait_until_counted(&app, &format!("probe-{cycle}")).await;
    }
    assert_enforced(&app, "last", 2).await;
}

/// A restart that happens between two requests (the connection died while idle) is noticed on
/// the next request, which fails open at worst; then counting resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_requests_is_survived() {
    let mut redis = RedisServer::start();
    let deadline = Duration::from_millis(100);
    let (app, _) = app(&redis, Quota::per_hour(2), FailureMode::Open, deadline);
    assert_enforced(&app, "dave", 2).await;

    redis.restart();
    let (status, state, took) = send(&app, "probe").await;
    assert_eq!(status, StatusCode::OK);
    assert!(state == "Allow" || state == "Skipped", "{state:?}");
    assert!(took < deadline + SLACK, "took {took:?}");
    wait_until_counted(&app, "probe").await;
    // The restarted server forgot "dave". This process remembers his denial until his window
    // ends, unless the store's reset listener has subscribed again meanwhile: subscribing forgets
    // what is remembered (a reset may have been missed while the connection was down). Either
    // way he is never admitted beyond his quota as the server counts it: refused from memory, or
    // counted afresh, exactly.
    let (status, state, _) = send(&app, "dave").await;
    match (status, state.as_str()) {
        (StatusCode::TOO_MANY_REQUESTS, "Deny") => {}
        (StatusCode::OK, "Allow") => {
            let (status, state, _) = send(&app, "dave").await;
            assert_eq!((status, state.as_str()), (StatusCode::OK, "Allow"));
            let (status, state, _) = send(&app, "dave").await;
            assert_eq!(
                (status, state.as_str()),
                (StatusCode::TOO_MANY_REQUESTS, "Deny")
            );
        }
        other => panic!("dave after the restart: {other:?}"),
    }
    // A new client is counted exactly.
    assert_enforced(&app, "erin-after-restart", 2).await;
}

/// A Redis that is not running when the service starts: requests fail open at once (connection
/// refused, then backoff; never waiting out the long deadline), and as soon as a server listens on
/// the port, limiting starts without rebuilding anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_is_down_at_startup_fails_open_then_is_used_once_it_appears() {
    let mut redis = RedisServer::start();
    // Nothing listens on the port any more, and nothing has connected yet.
    redis.kill();
    let deadline = Duration::from_secs(2);
    let fast = Duration::from_millis(500);
    let (app, calls) = app(&redis, Quota::per_hour(3), FailureMode::Open, deadline);

    let (status, state, took) = send(&app, "erin").await;
    assert_eq!((status, state.as_str()), (StatusCode::OK, "Skipped"));
    assert!(
        took < fast,
        "the first request took {took:?} (deadline {deadline:?})"
    );
    for i in 0..20 {
        let (status, state, took) = send(&app, "erin").await;
        assert_eq!((status, state.as_str()), (StatusCode::OK, "Skipped"));
        assert!(
            took < fast,
            "request {i} took {took:?} (deadline {deadline:?})"
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 21);

    redis.restart();
    wait_until_counted(&app, "probe").await;
    assert_enforced(&app, "erin", 3).await;
}

/// The same with fail closed: refused at once while nothing listens, limited once Redis is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_is_down_at_startup_fails_closed_fast() {
    let mut redis = RedisServer::start();
    redis.kill();
    let deadline = Duration::from_secs(2);
    let fast = Duration::from_millis(500);
    let (app, calls) = app(&redis, Quota::per_hour(2), FailureMode::Closed, deadline);

    for i in 0..10 {
        let (response, took) = timed_get(&app, "/", PEER, &[("x-client", "frank")]).await;
        assert!(
            took < fast,
            "request {i} took {took:?} (deadline {deadline:?})"
        );
        assert_unavailable(response, r#""api";q=2;w=3600"#).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    redis.restart();
    wait_until_counted(&app, "probe").await;
    assert_enforced(&app, "frank", 2).await;
}
