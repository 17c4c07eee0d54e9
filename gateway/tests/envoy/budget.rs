//! The caller's `grpc-timeout` (Envoy sends its filter's `timeout` as one) bounds how long the
//! service waits for its store: while Redis hangs, a caller that waits 200 ms gets
//! `failure_mode`'s answer in time, whatever the configured deadline. A value gRPC does not
//! define is ignored.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use ratelimit_gateway::config::EnvoySettings;
use ratelimit_gateway::envoy::RateLimitService;
use testkit::RedisServer;
use tonic::transport::Channel;
use tower_redis_ratelimit::HeaderFamilies;
use tower_redis_ratelimit::admission::FailureMode;

use crate::differences::TWO_LIMITS;
use crate::support::{Files, codes, header, redis_store, request, tcp};

/// The configured deadline: far longer than the callers below wait.
const DEADLINE: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_callers_grpc_timeout_cuts_the_deadline_while_redis_hangs() {
    let redis = RedisServer::start();
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], &redis_store(&redis.url()));
    let settings = EnvoySettings {
        failure_mode: FailureMode::Closed,
        deadline: DEADLINE,
        headers: HeaderFamilies::DEFAULT,
    };
    let service = RateLimitService::load(&rules.path(), settings, &rules.limits).unwrap();
    let (_served, mut client) = tcp(service).await;
    let asked = request("api", &[&[("user", "kim")]]);
    let answer = client.should_rate_limit(asked.clone()).await.unwrap();
    assert_eq!(codes(answer.get_ref()).1, Code::Ok);
    redis.freeze();

    let mut waiting = tonic::Request::new(asked.clone());
    waiting.set_timeout(Duration::from_millis(200));
    let (answer, took) = timed(&mut client, waiting).await;
    assert_eq!(codes(&answer).1, Code::OverLimit);
    assert_eq!(header(&answer, "retry-after"), Some("1"));
    // Half of the 200 ms: a timer fires late, never early, so anything under the configured
    // deadline is the caller's budget at work.
    assert!(took < DEADLINE, "{took:?}");

    let mut unreadable = tonic::Request::new(asked);
    let soon = "soon".parse().unwrap();
    unreadable.metadata_mut().insert("grpc-timeout", soon);
    let (answer, took) = timed(&mut client, unreadable).await;
    assert_eq!(codes(&answer).1, Code::OverLimit);
    assert!(took >= DEADLINE, "{took:?}");
}

/// The answer to `request`, and how long it took.
async fn timed(
    client: &mut RateLimitServiceClient<Channel>,
    request: tonic::Request<RateLimitRequest>,
) -> (RateLimitResponse, Duration) {
    let started = Instant::now();
    let answer = client.should_rate_limit(request).await.unwrap();
    (answer.into_inner(), started.elapsed())
}
