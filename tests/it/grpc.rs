//! The layers on a tonic gRPC server, called by a tonic client: a refused call fails with
//! `RESOURCE_EXHAUSTED` and carries the rate-limit metadata; a layer failing closed answers
//! `UNAVAILABLE`; a call without a key `INVALID_ARGUMENT`.

#[path = "../../examples/grpc/greeter.rs"]
mod greeter;

use std::time::Duration;

use tonic::Code;
use tonic::transport::{Channel, Server};
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{Quota, RateLimitLayer, RedisStore, Rule};

/// Serves the greeter behind `limit` on a free port; a channel to it.
async fn serve(limit: RateLimitLayer) -> Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = futures_util::stream::unfold(listener, |listener| async move {
        Some((listener.accept().await.map(|(stream, _)| stream), listener))
    });
    tokio::spawn(
        Server::builder()
            .layer(limit)
            .add_service(greeter::Greeter)
            .serve_with_incoming(incoming),
    );
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn metadata(map: &tonic::metadata::MetadataMap, key: &str) -> String {
    map.get(key)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_refused_call_is_resource_exhausted_with_the_rate_limit_metadata() {
    let limit = RateLimitLayer::builder()
        .rule(Rule::fixed_window(
            "calls",
            Quota::new(2, Duration::from_secs(10)),
        ))
        .key(HeaderKey::new("x-api-key"))
        .build()
        .unwrap();
    let channel = serve(limit).await;
    let key = [("x-api-key", "client")];
    for remaining in [1, 0] {
        let response = greeter::hello(channel.clone(), "you", &key).await.unwrap();
        assert_eq!(response.get_ref(), "hello, you");
        assert_eq!(
            metadata(response.metadata(), "ratelimit"),
            format!("\"calls\";r={remaining};t=10")
        );
        assert_eq!(
            metadata(response.metadata(), "rate-limiting-state"),
            "Allow"
        );
    }
    let refused = greeter::hello(channel.clone(), "you", &key)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("Retry after 10 seconds"),
        "{refused:?}"
    );
    assert_eq!(metadata(refused.metadata(), "retry-after"), "10");
    assert_eq!(
        metadata(refused.metadata(), "ratelimit"),
        "\"calls\";r=0;t=10"
    );
    assert_eq!(
        metadata(refused.metadata(), "ratelimit-policy"),
        "\"calls\";q=2;w=10"
    );
    assert_eq!(metadata(refused.metadata(), "rate-limiting-state"), "Deny");

    // No key: the call cannot be limited, and is refused as an invalid argument.
    let unkeyed = greeter::hello(channel, "you", &[]).await.unwrap_err();
    assert_eq!(unkeyed.code(), Code::InvalidArgument, "{unkeyed:?}");
    assert!(unkeyed.message().contains("x-api-key"), "{unkeyed:?}");
}

#[tokio::test]
async fn a_layer_failing_closed_answers_unavailable() {
    // Nothing listens on port 1: the store fails, and the layer fails closed.
    let limit = RateLimitLayer::builder()
        .rule(Rule::fixed_window("calls", Quota::per_minute(10)))
        .key(HeaderKey::new("x-api-key"))
        .store(RedisStore::open("redis://127.0.0.1:1").unwrap())
        .failure_mode(FailureMode::Closed)
        .build()
        .unwrap();
    let channel = serve(limit).await;
    let refused = greeter::hello(channel, "you", &[("x-api-key", "client")])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert_eq!(metadata(refused.metadata(), "retry-after"), "1");
}
