//! The draft's `pk` parameter: a digest of the client's key that tells clients apart without
//! showing the key, the same on every instance given the same secret.

use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{Quota, RateLimitLayer, Rule};

use crate::support::{get as send, header};

const PEER: &str = "198.51.100.4:5000";

fn instance(secret: &str) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(10)))
        .key(HeaderKey::new("x-api-key"))
        .partition_key(secret)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

async fn pk(app: &Router, key: &str) -> String {
    let response = send(app, "/", PEER, &[("x-api-key", key)]).await;
    let line = header(&response, "ratelimit");
    assert!(line.starts_with(r#""api";r="#), "{line}");
    assert!(!line.contains(key), "the key shows in {line}");
    line.split(";pk=")
        .nth(1)
        .unwrap_or_else(|| panic!("no pk in {line}"))
        .to_owned()
}

#[tokio::test]
async fn the_partition_key_tells_clients_apart_without_showing_them() {
    let (one, two) = (instance("fleet-secret"), instance("fleet-secret"));
    let alice = pk(&one, "alice-api-key").await;
    // `:` base64 of 16 bytes `:`.
    assert!(
        alice.starts_with(':') && alice.ends_with(':') && alice.len() == 26,
        "{alice}"
    );
    assert_eq!(
        pk(&two, "alice-api-key").await,
        alice,
        "another instance agrees"
    );
    assert_ne!(pk(&one, "bob-api-key").await, alice);
    assert_ne!(pk(&instance("other-secret"), "alice-api-key").await, alice);
}
