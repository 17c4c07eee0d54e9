//! Shadow mode: a limit that decides and counts but never changes what a client does (no
//! refusal, no rate-limit header unless asked, never a `Retry-After`); its switch goes both ways
//! at run time, per layer or shared; from a file, a route's own `shadow` wins over the top-level
//! one, and a reload keeps what an operator turned unless the file changed it.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::admission::{FailureMode, MissingKey};
use tower_redis_ratelimit::config::LimitsConfig;
use tower_redis_ratelimit::key::{Exemptions, HeaderKey};
use tower_redis_ratelimit::rate::{RateLimitLayerBuilder, ShadowSwitch};
use tower_redis_ratelimit::{Decision, Quota, RateLimitLayer, RedisStore, Rule};

use crate::support::{text, timed_get};

const PEER: &str = "203.0.113.7:4000";

/// The headers a client backs off by, or reads its state from: none may come from a shadow limit.
const TOLD: [&str; 6] = [
    "rate-limiting-state",
    "rate-limiting-total-requests",
    "ratelimit",
    "ratelimit-policy",
    "x-ratelimit-remaining",
    "retry-after",
];

/// A request's headers.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// The handler says what the limit decided.
async fn handler(decision: Option<Decision>) -> String {
    match decision {
        Some(decision) if decision.is_allowed() => "allowed".to_owned(),
        Some(_) => "denied, but let through".to_owned(),
        None => "no decision".to_owned(),
    }
}

/// A limit of 2 a minute per `x-client`.
fn limit() -> RateLimitLayerBuilder {
    RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(2)))
        .key(HeaderKey::new("x-client"))
}

fn app(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(handler)).layer(layer)
}

/// A response's status, the rate-limit headers it carries (`name: value`), and its body.
struct Seen {
    status: StatusCode,
    told: Vec<String>,
    body: String,
}

async fn send_as(app: &Router, headers: &[(&str, &str)]) -> Seen {
    let (response, _) = timed_get(app, "/", PEER, headers).await;
    let told = TOLD
        .iter()
        .filter_map(|name| {
            let value = response.headers().get(*name)?;
            Some(format!("{name}: {}", value.to_str().unwrap()))
        })
        .collect();
    Seen {
        status: response.status(),
        told,
        body: text(response).await,
    }
}

async fn send(app: &Router) -> Seen {
    send_as(app, &[("x-client", "c")]).await
}

#[tokio::test]
async fn a_layer_in_shadow_counts_but_never_changes_what_a_client_does() {
    let app = app(limit().shadow(true).build().unwrap());
    let mut bodies = Vec::new();
    for _ in 0..5 {
        let seen = send(&app).await;
        assert_eq!(seen.status, StatusCode::OK);
        // No `Deny`, no `Retry-After`, no `RateLimit` with nothing remaining: nothing at all.
        assert_eq!(seen.told, Vec::<String>::new());
        bodies.push(seen.body);
    }
    // The handler sees what the limit decided: it counted every request.
    assert_eq!(
        bodies,
        [
            "allowed",
            "allowed",
            "denied, but let through",
            "denied, but let through",
            "denied, but let through"
        ]
    );
}

#[tokio::test]
async fn shadow_headers_tell_a_shadow_state_and_nothing_clients_back_off_by() {
    let shadowed = app(limit().shadow(true).shadow_headers(true).build().unwrap());
    let mut told = Vec::new();
    for _ in 0..3 {
        let seen = send(&shadowed).await;
        assert_eq!(seen.status, StatusCode::OK);
        told.push(seen.told);
    }
    assert_eq!(
        told,
        [
            [
                "rate-limiting-state: Shadow-Allow",
                "rate-limiting-total-requests: 1"
            ],
            [
                "rate-limiting-state: Shadow-Allow",
                "rate-limiting-total-requests: 2"
            ],
            [
                "rate-limiting-state: Shadow-Deny",
                "rate-limiting-total-requests: 2"
            ],
        ]
    );
    // Enforced, the same layer tells everything again.
    let enforced = app(limit().shadow_headers(true).build().unwrap());
    let seen = send(&enforced).await;
    assert!(
        seen.told.contains(&"rate-limiting-state: Allow".to_owned()),
        "{:?}",
        seen.told
    );
}

/// What an enforcing layer refuses before or without a decision (no key, a denied key, a store
/// that failed while the layer fails closed) passes a layer in shadow, without a header.
#[tokio::test]
async fn a_layer_in_shadow_refuses_nothing_without_a_decision_either() {
    let layer = limit()
        .on_missing_key(MissingKey::Reject)
        .exemptions(Exemptions::new().deny_key("banned"))
        .shadow(true)
        .build()
        .unwrap();
    // Nothing listens on port 1: every store call fails at once.
    let failing = limit()
        .store(RedisStore::open("redis://127.0.0.1:1").unwrap())
        .failure_mode(FailureMode::Closed)
        .deadline(Duration::from_millis(500))
        .shadow(true)
        .build()
        .unwrap();
    let (layer_switch, failing_switch) = (
        layer.shadow_switch().clone(),
        failing.shadow_switch().clone(),
    );
    let (app, failing) = (app(layer), app(failing));
    let cases: [(&Router, Headers, StatusCode); 3] = [
        (&app, &[], StatusCode::BAD_REQUEST),
        (&app, &[("x-client", "banned")], StatusCode::FORBIDDEN),
        (
            &failing,
            &[("x-client", "c")],
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    ];
    for (app, headers, _) in cases {
        let seen = send_as(app, headers).await;
        assert_eq!(
            (seen.status, seen.told, seen.body.as_str()),
            (StatusCode::OK, Vec::new(), "no decision"),
            "{headers:?}"
        );
    }
    // The same layers, enforcing.
    layer_switch.set(false);
    failing_switch.set(false);
    for (app, headers, refused) in cases {
        assert_eq!(send_as(app, headers).await.status, refused, "{headers:?}");
    }
}

#[tokio::test]
async fn a_layers_own_switch_goes_both_ways_at_run_time() {
    for starts_in_shadow in [true, false] {
        let layer = limit().shadow(starts_in_shadow).build().unwrap();
        let switch = layer.shadow_switch().clone();
        let app = app(layer);
        for _ in 0..2 {
            send(&app).await;
        }
        let over = |expected| {
            let app = app.clone();
            async move { assert_eq!(send(&app).await.status, expected) }
        };
        if starts_in_shadow {
            over(StatusCode::OK).await;
        } else {
            over(StatusCode::TOO_MANY_REQUESTS).await;
        }
        switch.set(!starts_in_shadow);
        if starts_in_shadow {
            over(StatusCode::TOO_MANY_REQUESTS).await;
        } else {
            over(StatusCode::OK).await;
        }
        switch.set(starts_in_shadow);
        assert_eq!(switch.is_on(), starts_in_shadow);
    }
}

#[tokio::test]
async fn one_switch_turns_many_layers_into_observers_and_back() {
    let switch = ShadowSwitch::new(true);
    // The last of `shadow` and `shadow_switch` is the layer's switch.
    let (first, second) = (
        app(limit()
            .shadow(false)
            .shadow_switch(switch.clone())
            .build()
            .unwrap()),
        app(limit().shadow_switch(switch.clone()).build().unwrap()),
    );
    for app in [&first, &second] {
        for _ in 0..3 {
            assert_eq!(send(app).await.status, StatusCode::OK);
        }
    }
    switch.set(false);
    for app in [&first, &second] {
        let seen = send(app).await;
        assert_eq!(seen.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(seen.told.contains(&"rate-limiting-state: Deny".to_owned()));
    }
    switch.set(true);
    for app in [&first, &second] {
        assert_eq!(send(app).await.status, StatusCode::OK);
    }
}

/// A file of two routes limited to 1 a minute: `old`, and `new` rolled out with its own `shadow`
/// setting when given; the top-level `shadow` is `all`.
fn file(all: bool, new: Option<bool>) -> LimitsConfig {
    let new = new.map_or(String::new(), |on| format!("shadow = {on}"));
    toml::from_str(&format!(
        r#"
        shadow = {all}
        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }}]
        [routes.old]
        policy = "api"
        key = {{ header = "x-client" }}
        [routes.new]
        policy = "api"
        key = {{ header = "x-new-client" }}
        {new}
        "#
    ))
    .unwrap()
}

/// Whether the route's second request, over its limit, passes.
async fn passes_over_the_limit(layer: &RateLimitLayer, client: &str) -> bool {
    let app = app(layer.clone());
    send_as(&app, &[("x-client", client), ("x-new-client", client)]).await;
    let seen = send_as(&app, &[("x-client", client), ("x-new-client", client)]).await;
    seen.status == StatusCode::OK
}

#[tokio::test]
async fn a_routes_own_shadow_wins_over_the_top_level_one() {
    // (top-level, the new route's own) → (old passes over its limit, new passes over its limit)
    for (all, new, expected) in [
        (false, None, (false, false)),
        // One new route rolled out in shadow while the others are enforced.
        (false, Some(true), (false, true)),
        (true, None, (true, true)),
        // Every route in shadow but one that says otherwise.
        (true, Some(false), (true, false)),
    ] {
        let limits = file(all, new).build().unwrap();
        let (old, new_layer) = (limits.layer("old").unwrap(), limits.layer("new").unwrap());
        let client = format!("{all}-{new:?}");
        assert_eq!(
            (
                passes_over_the_limit(old, &client).await,
                passes_over_the_limit(new_layer, &client).await
            ),
            expected,
            "shadow = {all}, routes.new.shadow = {new:?}"
        );
        // The top-level switch turns the routes without their own setting, and only those.
        limits.shadow_switch().set(!all);
        assert_eq!(old.shadow_switch().is_on(), !all);
        assert_eq!(new_layer.shadow_switch().is_on(), new.unwrap_or(!all));
        // A route's own switch turns that route alone; without one, it is the top-level switch.
        new_layer.shadow_switch().set(all);
        assert_eq!(
            old.shadow_switch().is_on(),
            if new.is_some() { !all } else { all }
        );
    }
}

#[tokio::test]
async fn a_reload_keeps_the_switches_whose_setting_the_file_did_not_change() {
    let first = file(false, Some(true)).build().unwrap();
    // At run time: the new route is enforced, every other route put in shadow.
    first.layer("new").unwrap().shadow_switch().set(false);
    first.shadow_switch().set(true);

    // The same file again: both choices stand.
    let second = file(false, Some(true)).rebuild(&first).unwrap();
    assert!(!second.layer("new").unwrap().shadow_switch().is_on());
    assert!(second.shadow_switch().is_on());
    assert!(second.layer("old").unwrap().shadow_switch().is_on());
    // The rebuilt layers follow those switches, not copies of them.
    first.shadow_switch().set(false);
    assert!(!second.layer("old").unwrap().shadow_switch().is_on());
    assert!(!passes_over_the_limit(second.layer("old").unwrap(), "a").await);
    first.shadow_switch().set(true);

    // The file enforces the new route in its turn, and then changes its mind: a changed setting
    // starts as the file says, whatever the switch was turned to.
    let third = file(false, Some(false)).rebuild(&second).unwrap();
    assert!(!third.layer("new").unwrap().shadow_switch().is_on());
    let fourth = file(false, Some(true)).rebuild(&third).unwrap();
    assert!(fourth.layer("new").unwrap().shadow_switch().is_on());
    // The top-level setting did not change: still as turned.
    assert!(fourth.shadow_switch().is_on());
    // A route that drops its own setting follows the top-level switch.
    let fifth = file(true, None).rebuild(&fourth).unwrap();
    assert!(fifth.layer("new").unwrap().shadow_switch().is_on());
    fifth.shadow_switch().set(false);
    assert!(!fifth.layer("new").unwrap().shadow_switch().is_on());
}
