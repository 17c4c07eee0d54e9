//! Over the wire: a tonic client of envoy-types, h2c on TCP and on a Unix socket, as Envoy
//! connects.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimit_gateway::server::Listener;
use tower_redis_ratelimit::admission::FailureMode;

use crate::differences::TWO_LIMITS;
use crate::support::{Files, codes, request, serve, tcp, unix_client};

#[tokio::test]
async fn envoys_client_is_answered_over_tcp() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let (_served, mut client) = tcp(rules.service(FailureMode::Open)).await;
    let user = request("api", &[&[("user", "dave")]]);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let answer = client
            .should_rate_limit(user.clone())
            .await
            .unwrap()
            .into_inner();
        seen.push(codes(&answer).1);
    }
    assert_eq!(seen, [Code::Ok, Code::Ok, Code::Ok, Code::OverLimit]);
    let empty = client
        .should_rate_limit(request("", &[]))
        .await
        .unwrap_err();
    assert_eq!(empty.message(), "rate limit domain must not be empty");
}

#[tokio::test]
async fn envoys_client_is_answered_on_a_unix_socket() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let socket = rules.dir.path().join("rls.sock");
    let listener = Listener::unix(&socket).expect("the socket");
    let _served = serve(rules.service(FailureMode::Open), listener);
    let mut client = unix_client(&socket).await;
    let answer = client
        .should_rate_limit(request("api", &[&[("user", "erin")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(codes(&answer), (vec![Code::Ok], Code::Ok));
    assert_eq!(answer.statuses[0].limit_remaining, 2);
}
