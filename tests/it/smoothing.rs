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
use tower_redis_ratelimit::config::LimitsConfig;
use tower_redis_ratelimit::key::GlobalKey;
use tower_redis_ratelimit::rate::Waited;
use tower_redis_ratelimit::{
    ConfigError, Decision, MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store,
};

use crate::support::{RedisServer, get as send, header};

const PEER: &str = "192.0.2.8:4000";

/// 2 per second with a burst of 2 (a request every 500 ms), waiting up to 1 s.
fn smoothed(rule: fn(&'static str, Quota) -> Rule) -> Rule {
    rule("api", Quota::per_second(2).with_burst(2)).with_max_delay(Duration::from_secs(1))
}

/// The delay each request's decision carried, in the order the handler ran.
type Served = Arc<Mutex<Vec<Duration>>>;

/// An app behind `rule` in `store`, whose handler notes the delay its decision carried.
fn app(rule: Rule, store: impl Store) -> (Router, Served) {
    let served = Arc::new(Mutex::new(Vec::new()));
    let log = served.clone();
    let handler = move |decision: Option<Decision>| {
        let log = log.clone();
        async move {
            let delay = decision.map_or(Duration::MAX, |decision| decision.delay());
            log.lock().unwrap().push(delay);
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
        assert_eq!(*served.lock().unwrap(), [ms(0), ms(0), ms(500), ms(1_000)]);
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
    let ms = Duration::from_millis;
    assert_eq!(*served.lock().unwrap(), [ms(0), ms(0), ms(500), ms(1_000)]);
}

#[tokio::test(start_paused = true)]
async fn the_wait_is_not_bounded_by_the_store_deadline() {
    // A deadline of 50 ms bounds the store call only: a wait of 1 s after it is served.
    let store = MemoryStore::builder()
        .clock(ManualClock::starting_now())
        .build();
    let rule = Rule::gcra("api", Quota::per_second(1).with_burst(1))
        .with_max_delay(Duration::from_secs(1));
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
        let error = RateLimitLayer::builder()
            .rule(rule.with_max_delay(delay))
            .key(GlobalKey::new("all"))
            .build()
            .unwrap_err();
        assert_eq!(error, ConfigError::DelayNotScheduled { rule: "w".into() });
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

/// A route's `max_delay` in a file: given to its policy's GCRA and token-bucket rules (its window
/// rules refuse as they do), and refused, by its field, on a route with no such rule or out of
/// range.
#[tokio::test(start_paused = true)]
async fn a_route_of_a_file_smooths_its_bucket_rules_and_names_a_misplaced_max_delay() {
    let file = |algorithm: &str, max_delay: &str| {
        format!(
            r#"
            [policies.api]
            rules = [
              {{ name = "second", algorithm = "{algorithm}", limit = 2, period = "1s", burst = 2 }},
              {{ name = "hour", algorithm = "fixed_window", limit = 100, period = "1h" }},
            ]
            [routes.api]
            policy = "api"
            key = {{ global = "all" }}
            max_delay = "{max_delay}"
            "#
        )
        .replace(
            ", burst = 2",
            if algorithm == "gcra" {
                ", burst = 2"
            } else {
                ""
            },
        )
    };
    let config: LimitsConfig = toml::from_str(&file("gcra", "1s")).unwrap();
    let limits = config.build().unwrap();
    let layer = limits.layer("api").unwrap().clone();
    let delays: Vec<_> = layer.policy().rules().iter().map(Rule::max_delay).collect();
    assert_eq!(delays, [Some(Duration::from_secs(1)), None]);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let mut answers = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let status = send(&app, "/", PEER, &[]).await.status().as_u16();
        answers.push((status, started.elapsed() >= Duration::from_millis(450)));
    }
    assert_eq!(
        answers,
        [
            (200, false),
            (200, false),
            (200, true),
            (200, true),
            (429, false)
        ]
    );

    let error = |text: &str| {
        let config: LimitsConfig = toml::from_str(text).unwrap();
        config.build().err().unwrap().to_string()
    };
    assert_eq!(
        error(&file("sliding_log", "1s")),
        "`routes.api.max_delay`: delays only gcra and token_bucket rules, and policy \"api\" has \
         none: use such a rule to smooth bursts, or remove max_delay"
    );
    assert_eq!(
        error(&file("gcra", "2min")),
        "`routes.api.max_delay`: rule \"second\" has a max_delay of 120s: use between 1 ms and 60s"
    );
}

/// A cost past the burst fits when the burst and the delay together hold it, waiting for its
/// excess; past both it can never pass, and the body says how much can.
#[tokio::test(start_paused = true)]
async fn a_cost_past_the_burst_waits_and_one_past_the_delay_too_is_never() {
    let store = MemoryStore::builder()
        .clock(ManualClock::starting_now())
        .build();
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::builder()
            .rule(smoothed(Rule::gcra))
            .key(GlobalKey::new("all"))
            .store(store)
            .cost(crate::support::cost)
            .build()
            .unwrap(),
    );
    let never = send(&app, "/", PEER, &[("x-cost", "5")]).await;
    assert_eq!(never.status(), 429);
    assert_eq!(header(&never, "retry-after"), "");
    let body: serde_json::Value = serde_json::from_str(&crate::support::text(never).await).unwrap();
    assert_eq!(
        body["detail"],
        "This request costs 5 but the rate limit \"api\" (2 per 1s) admits at most 4 at once, 2 \
         of them after a wait; it can never be allowed, so do not retry it."
    );
    let started = Instant::now();
    let four = send(&app, "/", PEER, &[("x-cost", "4")]).await;
    assert_eq!(four.status(), 200);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

/// Two rate limits in a row each make a request wait their own delay: `rate::Waited` sums them,
/// where the `Decision` is the inner layer's. In shadow mode a limit makes no one wait.
#[tokio::test(start_paused = true)]
async fn stacked_limits_wait_in_turn_and_a_shadow_limit_never_waits() {
    let layer = |name: &'static str, shadow: bool| {
        RateLimitLayer::builder()
            .rule(
                Rule::gcra(name, Quota::per_second(1).with_burst(1))
                    .with_max_delay(Duration::from_secs(2)),
            )
            .key(GlobalKey::new("all"))
            .store(
                MemoryStore::builder()
                    .clock(ManualClock::starting_now())
                    .build(),
            )
            .shadow(shadow)
            .build()
            .unwrap()
    };
    let handler = |waited: Option<axum::Extension<Waited>>, decision: Option<Decision>| async move {
        let waited = waited.map_or(Duration::ZERO, |waited| waited.0.duration());
        let delay = decision.map_or(Duration::MAX, |decision| decision.delay());
        format!("{} {}", waited.as_millis(), delay.as_millis())
    };
    let app = Router::new()
        .route("/", get(handler))
        .layer(layer("inner", false))
        .layer(layer("outer", false));
    let body = |response| async move { crate::support::text(response).await };
    assert_eq!(body(send(&app, "/", PEER, &[]).await).await, "0 0");
    let started = Instant::now();
    // Each limit's bucket is full: a second each, one after the other.
    assert_eq!(body(send(&app, "/", PEER, &[]).await).await, "2000 1000");
    assert_eq!(started.elapsed(), Duration::from_secs(2));

    let shadowed = Router::new()
        .route("/", get(handler))
        .layer(layer("shadowed", true));
    for _ in 0..3 {
        let started = Instant::now();
        let response = send(&shadowed, "/", PEER, &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
