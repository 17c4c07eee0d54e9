//! Smoothing a burst (`Rule::with_max_delay`): a request over a GCRA or token-bucket rule that
//! would conform within the rule's `max_delay` is admitted, waits until then (on the runtime's
//! clock, outside the store's deadline) and is served with the headers of an admitted request;
//! one that would wait longer is refused with 429, as before. The window algorithms refuse a
//! `max_delay` when the layer is built.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::time::Instant;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::GlobalKey;
use tower_redis_ratelimit::{
    ConfigError, Decision, MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store,
};

use crate::support::{RedisServer, get as send, header};

const PEER: &str = "192.0.2.8:4000";

/// 2 per second with a burst of 2 (a request every 500 ms), waiting up to 1 s.
fn smoothed(rule: fn(&'static str, Quota) -> Rule) -> Rule {
    rule("api", Quota::per_second(2).with_burst(2)).with_max_delay(Duration::from_secs(1))
}

/// An app behind `rule` in `store`, whose handler notes when it ran and the delay its decision
/// carried.
fn app(rule: Rule, store: impl Store) -> (Router, Arc<Mutex<Vec<(Instant, Duration)>>>) {
    let served = Arc::new(Mutex::new(Vec::new()));
    let log = served.clone();
    let handler = move |decision: Option<Decision>| {
        let log = log.clone();
        async move {
            let delay = decision.map_or(Duration::MAX, |decision| decision.delay());
            log.lock().unwrap().push((Instant::now(), delay));
            "ok"
        }
    };
    let layer = RateLimitLayer::builder()
        .rule(rule)
        .key(GlobalKey::new("all"))
        .store(store)
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    (Router::new().route("/", get(handler)).layer(layer), served)
}

/// Five requests one after another at one instant of the store's clock: each one's status,
/// `Rate-Limiting-State`, and how long it took on the runtime's clock.
async fn burst(app: &Router) -> Vec<(u16, String, Duration)> {
    let mut answers = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let response = send(app, "/", PEER, &[]).await;
        answers.push((
            response.status().as_u16(),
            header(&response, "rate-limiting-state"),
            started.elapsed(),
        ));
    }
    answers
}

#[tokio::test(start_paused = true)]
async fn a_burst_in_memory_waits_its_turn_then_is_refused_past_max_delay() {
    for rule in [Rule::gcra as fn(_, _) -> _, Rule::token_bucket] {
        let store = MemoryStore::builder()
            .clock(ManualClock::starting_now())
            .build();
        let (app, served) = app(smoothed(rule), store);
        let answers = burst(&app).await;
        let ms = Duration::from_millis;
        // Two at once (the burst), then 500 ms and 1 s later (the store's clock stood still:
        // their places were counted when they were admitted), then refused at once.
        let expected = [
            (200, "Allow".to_owned(), ms(0)),
            (200, "Allow".to_owned(), ms(0)),
            (200, "Allow".to_owned(), ms(500)),
            (200, "Allow".to_owned(), ms(1_000)),
            (429, "Deny".to_owned(), ms(0)),
        ];
        assert_eq!(answers, expected);
        let delays: Vec<Duration> = served.lock().unwrap().iter().map(|(_, d)| *d).collect();
        assert_eq!(delays, [ms(0), ms(0), ms(500), ms(1_000)]);
    }
}

#[tokio::test]
async fn a_burst_in_redis_waits_its_turn_then_is_refused_past_max_delay() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .clock(ManualClock::starting_now())
        .build()
        .unwrap();
    let (app, served) = app(smoothed(Rule::gcra), store);
    let answers = burst(&app).await;
    let statuses: Vec<u16> = answers.iter().map(|(status, ..)| *status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 429]);
    // Real time here (the store answers over a socket): each wait at least its delay, and not
    // much more.
    for (index, least) in [(2, 500), (3, 1_000)] {
        let took = answers[index].2;
        let least = Duration::from_millis(least);
        assert!(
            took >= least && took < least + Duration::from_millis(400),
            "request {index} took {took:?}"
        );
    }
    assert!(answers[4].2 < Duration::from_millis(400), "{answers:?}");
    let delays: Vec<Duration> = served.lock().unwrap().iter().map(|(_, d)| *d).collect();
    let ms = Duration::from_millis;
    assert_eq!(delays, [ms(0), ms(0), ms(500), ms(1_000)]);
}

#[tokio::test(start_paused = true)]
async fn the_wait_is_not_bounded_by_the_store_deadline() {
    // A deadline of 50 ms bounds the store call only: a wait of 1 s after it is served.
    let store = MemoryStore::builder()
        .clock(ManualClock::starting_now())
        .build();
    let rule =
        Rule::gcra("api", Quota::per_second(1).with_burst(1)).with_max_delay(Duration::from_secs(1));
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::builder()
            .rule(rule)
            .key(GlobalKey::new("all"))
            .store(store)
            .deadline(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    let started = Instant::now();
    let waited = send(&app, "/", PEER, &[]).await;
    assert_eq!(waited.status(), 200);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(header(&waited, "rate-limiting-state"), "Allow");
}

#[test]
fn window_algorithms_refuse_a_max_delay_when_the_layer_is_built() {
    let delay = Duration::from_millis(500);
    for rule in [
        Rule::fixed_window("w", Quota::per_second(10)),
        Rule::sliding_log("w", Quota::per_second(10)),
        Rule::sliding_window("w", Quota::per_second(10), 10),
    ] {
        let algorithm = rule.algorithm();
        let error = RateLimitLayer::builder()
            .rule(rule.with_max_delay(delay))
            .key(GlobalKey::new("all"))
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            ConfigError::DelayNotScheduled {
                rule: "w".into(),
                algorithm
            }
        );
    }
    let too_long = RateLimitLayer::builder()
        .rule(Rule::gcra("g", Quota::per_second(10)).with_max_delay(Duration::from_secs(61)))
        .key(GlobalKey::new("all"))
        .build()
        .unwrap_err();
    assert!(
        matches!(too_long, ConfigError::MaxDelayOutOfRange { .. }),
        "{too_long}"
    );
}
