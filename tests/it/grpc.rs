//! The layers in front of gRPC: a refused call fails with `RESOURCE_EXHAUSTED` and carries the
//! rate-limit metadata; a layer failing closed answers `UNAVAILABLE`; a call without a key
//! `INVALID_ARGUMENT`.
//!
//! `examples/grpc` runs as a process, a tonic server and a tonic client; the other cases send
//! calls straight through the layer to a stand-in service and read its answers as tonic reads a
//! Trailers-Only response ([`tonic::Status::from_header_map`]).

use std::process::Command;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use http::{Request, Response};
use tonic::{Code, Status};
use tower::ServiceExt;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{Quota, RateLimitLayer, RedisStore, Rule};

use crate::support::{example_binary, success_output};

const METHOD: &str = "/demo.Greeter/Hello";

/// A service answering every call to [`METHOD`] with `OK`, behind `limit`.
fn service(limit: RateLimitLayer) -> Router {
    Router::new()
        .route(
            METHOD,
            post(|| async {
                Response::builder()
                    .header("content-type", "application/grpc")
                    .header("grpc-status", "0")
                    .body(Body::empty())
                    .unwrap()
            }),
        )
        .layer(limit)
}

/// A unary call, with `metadata`, as a gRPC client sends it.
async fn call(service: &Router, metadata: &[(&str, &str)]) -> Response<Body> {
    let mut request = Request::post(METHOD)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (key, value) in metadata {
        request = request.header(*key, *value);
    }
    let request = request.body(Body::empty()).unwrap();
    service.clone().oneshot(request).await.unwrap()
}

/// The call's status as a tonic client reads it.
fn status(response: &Response<Body>) -> Status {
    assert_eq!(response.status(), 200, "gRPC answers are HTTP 200");
    Status::from_header_map(response.headers()).expect("a grpc-status header")
}

fn metadata(status: &Status, key: &str) -> String {
    status
        .metadata()
        .get(key)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_example_admits_three_calls_then_fails_them_with_resource_exhausted() {
    let stdout = success_output(&mut Command::new(example_binary("grpc")));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("grpc: serving demo.Greeter on http://127.0.0.1:"),
        "{stdout}"
    );
    let refused = r#"ResourceExhausted "Rate limit \"calls\" (3 per 10s) exceeded. Retry after 10 seconds.", retry-after: 10, ratelimit: "calls";r=0;t=10"#;
    assert_eq!(
        lines[1..],
        [
            r#"call 1: OK "hello, grpc", ratelimit: "calls";r=2;t=10"#,
            r#"call 2: OK "hello, grpc", ratelimit: "calls";r=1;t=10"#,
            r#"call 3: OK "hello, grpc", ratelimit: "calls";r=0;t=10"#,
            &format!("call 4: {refused}"),
            &format!("call 5: {refused}"),
        ]
    );
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
    let service = service(limit);
    let key = [("x-api-key", "client")];
    for remaining in [1, 0] {
        let admitted = status(&call(&service, &key).await);
        assert_eq!(admitted.code(), Code::Ok, "{admitted:?}");
        assert_eq!(
            metadata(&admitted, "ratelimit"),
            format!("\"calls\";r={remaining};t=10")
        );
        assert_eq!(metadata(&admitted, "rate-limiting-state"), "Allow");
    }
    let refused = status(&call(&service, &key).await);
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("Retry after 10 seconds"),
        "{refused:?}"
    );
    assert_eq!(metadata(&refused, "retry-after"), "10");
    assert_eq!(metadata(&refused, "ratelimit"), "\"calls\";r=0;t=10");
    assert_eq!(metadata(&refused, "ratelimit-policy"), "\"calls\";q=2;w=10");
    assert_eq!(metadata(&refused, "rate-limiting-state"), "Deny");

    // No key: the call cannot be limited, and is refused as an invalid argument.
    let unkeyed = status(&call(&service, &[]).await);
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
    let refused = status(&call(&service(limit), &[("x-api-key", "client")]).await);
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert_eq!(metadata(&refused, "retry-after"), "1");
}
