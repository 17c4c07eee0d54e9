//! The warning a layer logs when its store fails: there, so an outage is noticed, and throttled to
//! one per second per layer, so an outage does not flood the log with one line per request.
//!
//! The store fails synchronously, so every request is decided inside `call`, on the test's
//! thread, where a test-local subscriber captures the log. The throttle keeps its own monotonic
//! time, which a test cannot drive: the bounds below hold however long the requests take (at
//! most one warning per started second), and come down to exactly one on any machine that sends
//! the requests within a second.

use std::time::Instant;

use crate::support::logs::Logs;
use crate::support::{get as send, header};
use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::{GlobalKey, Key};
use tower_redis_ratelimit::store::{StoreError, StoreFuture};
use tower_redis_ratelimit::{Decision, Policy, Quota, RateLimitLayer, Rule, Store};

const PEER: &str = "203.0.113.8:4000";
const FAILED_OPEN: &str = "rate limiting skipped: the store failed and the layer fails open";
const FAILED_CLOSED: &str = "request refused: the store failed and the layer fails closed";

/// A store that is down: every call fails at once.
struct DownStore;

fn down<T>() -> StoreFuture<T> {
    StoreFuture::ready(Err(StoreError::bad_reply("the test store is down")))
}

impl Store for DownStore {
    fn check(&self, _: &Key, _: &Policy, _: u32) -> StoreFuture<Decision> {
        down()
    }
}

fn app(name: &str, failure: FailureMode) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window(name, Quota::per_minute(10)))
        .key(GlobalKey::new("everyone"))
        .store(DownStore)
        .failure_mode(failure)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

/// At most one warning per started second (the throttle's interval) since `started`.
fn allowed_warnings(started: Instant) -> usize {
    // The throttle counts whole milliseconds, so two warnings are at least 999 ms apart.
    1 + started.elapsed().as_millis() as usize / 999
}

#[tokio::test]
async fn failing_open_warns_once_per_second_per_layer() {
    let (log, _guard) = Logs::capture();
    let started = Instant::now();
    let first = app("first", FailureMode::Open);
    let second = app("second", FailureMode::Open);
    for _ in 0..100 {
        for app in [&first, &second] {
            let response = send(app, "/", PEER, &[]).await;
            assert_eq!(response.status(), 200);
            assert_eq!(header(&response, "rate-limiting-state"), "Skipped");
        }
    }
    let allowed = allowed_warnings(started);
    // Each layer has its own throttle: the second one's outage is reported even though the first
    // one just warned, and neither repeats itself within a second.
    for name in ["first", "second"] {
        let warnings: Vec<_> = log
            .lines_with(FAILED_OPEN)
            .into_iter()
            .filter(|line| line.contains(&format!(r#"policy=["{name}"]"#)))
            .collect();
        assert!(
            (1..=allowed).contains(&warnings.len()),
            "{} warnings for 100 failures of layer {name} in {:?}: {warnings:#?}",
            warnings.len(),
            started.elapsed()
        );
        let warning = &warnings[0];
        assert!(warning.contains(" WARN "), "{warning}");
        assert!(
            warning.contains(
                "error=the rate-limit store sent an unexpected reply: the test store is down"
            ),
            "{warning}"
        );
        // The first warning of an outage has held nothing back.
        assert!(warning.contains("suppressed=0"), "{warning}");
    }
}

#[tokio::test]
async fn failing_closed_warns_once_per_second_too() {
    let (log, _guard) = Logs::capture();
    let started = Instant::now();
    let app = app("closed", FailureMode::Closed);
    for _ in 0..100 {
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 503);
    }
    let warnings = log.lines_with(FAILED_CLOSED);
    assert!(
        (1..=allowed_warnings(started)).contains(&warnings.len()),
        "{} warnings for 100 failures in {:?}: {warnings:#?}",
        warnings.len(),
        started.elapsed()
    );
    assert!(warnings[0].contains(" WARN "), "{}", warnings[0]);
    assert!(log.lines_with(FAILED_OPEN).is_empty());
}

/// A store that answers logs nothing: the warning means an outage.
#[tokio::test]
async fn a_working_store_logs_no_warning() {
    let (log, _guard) = Logs::capture();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("fine", Quota::per_minute(10)))
        .key(GlobalKey::new("everyone"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    for _ in 0..3 {
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
    assert!(log.lines_with(" WARN ").is_empty());
    // The subscriber captures this thread's events: a warning would have been seen.
    tracing::warn!("canary");
    assert_eq!(log.lines_with("canary").len(), 1);
}
