//! Each decision is a `tracing` span at debug level (`admission`, with what limits and which
//! policy), holding the store's work and one `decided` event (or `the store failed`): with
//! debug on, a request's limiting can be followed in the log.

use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::key::GlobalKey;
use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use crate::support::logs::Logs;
use crate::support::{RedisServer, get as send};

const PEER: &str = "203.0.113.9:4000";

fn app(name: &str, store: impl Store) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window(name, Quota::per_minute(2)))
        .key(GlobalKey::new("everyone"))
        .store(store)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

/// The `decided` lines of policy `name`, in the span that names it.
fn decided(log: &Logs, name: &str) -> Vec<String> {
    log.lines_with(": decided ")
        .into_iter()
        .filter(|line| {
            line.contains(&format!(
                r#"admission{{limiting="rate limiting" policy=["{name}"]}}"#
            ))
        })
        .collect()
}

async fn three_requests_then_check(app: &Router, log: &Logs, name: &str) {
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(send(app, "/", PEER, &[]).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    let lines = decided(log, name);
    assert_eq!(lines.len(), 3, "{}", log.text());
    for (line, admitted) in lines.iter().zip([true, true, false]) {
        assert!(line.contains(" DEBUG "), "{line}");
        assert!(line.ends_with(&format!("admitted={admitted}")), "{line}");
    }
}

#[tokio::test]
async fn an_in_process_decision_is_a_span_with_its_event() {
    let (log, _guard) = Logs::capture();
    let app = app("spans-memory", tower_redis_ratelimit::MemoryStore::new());
    three_requests_then_check(&app, &log, "spans-memory").await;
}

/// A Redis decision waits for the store in the response future: the span goes with it.
#[tokio::test]
async fn a_redis_decision_is_a_span_with_its_event() {
    let redis = RedisServer::start();
    let (log, _guard) = Logs::capture();
    let app = app("spans-redis", RedisStore::open(&redis.url()).unwrap());
    three_requests_then_check(&app, &log, "spans-redis").await;
}

/// Spans cost nothing when debug is off: no line at all at info.
#[tokio::test]
async fn nothing_is_logged_below_debug() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = app("spans-quiet", tower_redis_ratelimit::MemoryStore::new());
    for _ in 0..3 {
        send(&app, "/", PEER, &[]).await;
    }
    assert_eq!(logs.text(), "");
}

/// A decision by a plan's policy names the plan in its span; one by the default policy does not.
#[tokio::test]
async fn a_plans_decision_names_its_plan() {
    let (log, _guard) = Logs::capture();
    let pro = Policy::try_from(Rule::fixed_window("spans-plans", Quota::per_minute(5))).unwrap();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("spans-plans", Quota::per_minute(2)))
        .plan("pro", &pro)
        .choose_plan(crate::support::plan)
        .key(GlobalKey::new("everyone"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    send(&app, "/", PEER, &[("x-plan", "pro")]).await;
    send(&app, "/", PEER, &[]).await;
    let lines = log.lines_with(": decided ");
    assert_eq!(lines.len(), 2, "{}", log.text());
    assert!(
        lines[0]
            .contains(r#"admission{limiting="rate limiting" policy=["spans-plans"] plan="pro"}"#),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(r#"admission{limiting="rate limiting" policy=["spans-plans"]}"#),
        "{}",
        lines[1]
    );
}
