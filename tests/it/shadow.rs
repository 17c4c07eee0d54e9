//! Shadow mode: a limit that decides, counts and tells, but never refuses; per layer, through a
//! switch shared by many layers, and from a configuration file.

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::config::LimitsConfig;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::rate::ShadowSwitch;
use tower_redis_ratelimit::{Decision, Quota, RateLimitLayer, Rule};

use crate::support::{header, text, timed_get};

const PEER: &str = "203.0.113.7:4000";

/// The handler says what the limit decided.
async fn handler(decision: Option<Decision>) -> String {
    match decision {
        Some(decision) if decision.is_allowed() => "allowed".to_owned(),
        Some(_) => "denied, but let through".to_owned(),
        None => "no decision".to_owned(),
    }
}

fn app(shadow: bool, switch: Option<ShadowSwitch>) -> Router {
    let mut builder = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(2)))
        .key(HeaderKey::new("x-client"))
        .shadow(shadow);
    if let Some(switch) = switch {
        builder = builder.shadow_switch(switch);
    }
    Router::new()
        .route("/", get(handler))
        .layer(builder.build().unwrap())
}

async fn send(app: &Router) -> (StatusCode, String, String, String, String) {
    let (response, _) = timed_get(app, "/", PEER, &[("x-client", "c")]).await;
    (
        response.status(),
        header(&response, "rate-limiting-state"),
        header(&response, "ratelimit"),
        header(&response, "retry-after"),
        text(response).await,
    )
}

#[tokio::test]
async fn a_layer_in_shadow_tells_and_counts_but_never_refuses() {
    let app = app(true, None);
    for _ in 0..2 {
        let (status, state, _, _, body) = send(&app).await;
        assert_eq!(
            (status, state.as_str(), body.as_str()),
            (StatusCode::OK, "Allow", "allowed")
        );
    }
    // Over the limit: passed, with every header the refusal would have carried.
    for _ in 0..3 {
        let (status, state, ratelimit, retry_after, body) = send(&app).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(state, "Deny");
        assert_eq!(ratelimit, "\"api\";r=0;t=60");
        assert_eq!(retry_after, "60");
        assert_eq!(body, "denied, but let through");
    }
}

#[tokio::test]
async fn one_switch_turns_many_layers_into_observers_and_back() {
    let switch = ShadowSwitch::new(true);
    let (first, second) = (
        app(false, Some(switch.clone())),
        app(false, Some(switch.clone())),
    );
    for app in [&first, &second] {
        for _ in 0..3 {
            assert_eq!(send(app).await.0, StatusCode::OK);
        }
    }
    switch.set(false);
    for app in [&first, &second] {
        let (status, state, ..) = send(app).await;
        assert_eq!(
            (status, state.as_str()),
            (StatusCode::TOO_MANY_REQUESTS, "Deny")
        );
    }
}

#[tokio::test]
async fn routes_from_a_file_run_in_shadow_one_by_one_or_all_at_once() {
    let file = |all: bool, route: bool| {
        format!(
            r#"
            shadow = {all}
            [policies.api]
            rules = [{{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }}]
            [routes.api]
            policy = "api"
            key = {{ header = "x-client" }}
            shadow = {route}
            "#
        )
    };
    for (all, route, refused) in [
        (false, false, true),
        (false, true, false),
        (true, false, false),
    ] {
        let limits = toml::from_str::<LimitsConfig>(&file(all, route))
            .unwrap()
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(handler))
            .layer(limits.layer("api").unwrap().clone());
        send(&app).await;
        let expected = if refused {
            StatusCode::TOO_MANY_REQUESTS
        } else {
            StatusCode::OK
        };
        assert_eq!(
            send(&app).await.0,
            expected,
            "shadow = {all}, route shadow = {route}"
        );
        // The file's switch can be turned off at run time.
        if all {
            limits.shadow_switch().set(false);
            assert_eq!(send(&app).await.0, StatusCode::TOO_MANY_REQUESTS);
        }
    }
}
