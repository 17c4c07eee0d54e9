//! Exact counts through Redis: many layers, one limit.

use std::time::Duration;

use crate::support::{RedisServer, get as send};
use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::key::GlobalKey;
use tower_redis_ratelimit::{Quota, RateLimitLayer, RedisStore, Rule};

/// Four independent layers (as four replicas would have), each with its own store handle and
/// connection, share one Redis: of 200 concurrent requests against a quota of 50, exactly 50 pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_replicas_sharing_redis_admit_exactly_the_quota() {
    let redis = RedisServer::start();
    let replicas: Vec<Router> = (0..4)
        .map(|_| {
            let layer = RateLimitLayer::builder()
                .rule(Rule::fixed_window("shared", Quota::per_hour(50)))
                .key(GlobalKey::new("everyone"))
                .store(RedisStore::open(&redis.url()).unwrap())
                .deadline(Duration::from_secs(5))
                .build()
                .unwrap();
            Router::new()
                .route("/", get(|| async { "ok" }))
                .layer(layer)
        })
        .collect();
    let requests = (0..200).map(|i| {
        let app = replicas[i % 4].clone();
        tokio::spawn(async move {
            send(&app, "/", "203.0.113.1:1000", &[])
                .await
                .status()
                .as_u16()
        })
    });
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        50,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 150);
}
