//! `ratelimit-gateway serve` run as a process with `[serve.envoy]`: the same listeners answer
//! Envoy's gRPC and the gateway endpoints, and SIGHUP reloads the rules keeping the counts.

use std::process::Stdio;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use testkit::{RedisServer, TempDir};

use crate::process::GatewayProcess;
use crate::support::{codes, remaining, request, unix_client};

const RULES: &str = "
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 5
";

#[tokio::test]
async fn serve_answers_envoy_beside_the_gateway_endpoints_and_a_reload_keeps_counts() {
    let redis = RedisServer::start();
    let dir = TempDir::new("envoy-serve").unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/api.yaml"), RULES).unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\n\n[serve]\nlisten = \"127.0.0.1:0\"\nsocket = \"{}\"\n\n[serve.envoy]\nrules = \"rules\"\n",
            redis.url(),
            dir.path().join("rls.sock").display()
        ),
    )
    .unwrap();
    let (mut process, line, _stdout) = GatewayProcess::start("serve", &config, Stdio::null());
    let addr = line
        .strip_prefix("serve: listening on ")
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(line.contains("envoy: 1 domains"), "{line}");
    let mut client = RateLimitServiceClient::connect(addr.clone()).await.unwrap();
    let user = request("api", &[&[("user", "frank")]]);
    for _ in 0..2 {
        client.should_rate_limit(user.clone()).await.unwrap();
    }
    // And on the Unix socket, counting in the same store.
    let mut beside = unix_client(&dir.path().join("rls.sock")).await;
    let answer = beside
        .should_rate_limit(user.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(remaining(&answer), vec![2]);
    // The gateway endpoints on the same listener.
    let plain = reqwest::get(format!("{addr}/auth_request")).await.unwrap();
    assert_ne!(plain.status(), reqwest::StatusCode::NOT_FOUND);
    // A limit raised, a reload: the two requests made so far still count.
    std::fs::write(
        dir.path().join("rules/api.yaml"),
        RULES.replace("requests_per_unit: 5", "requests_per_unit: 10"),
    )
    .unwrap();
    process.signal("-HUP");
    let mut seen = Vec::new();
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let answer = client
            .should_rate_limit(user.clone())
            .await
            .unwrap()
            .into_inner();
        seen = remaining(&answer);
        if answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit
            == 10
        {
            break;
        }
    }
    let after: u32 = seen[0];
    assert!(after <= 7, "the reload kept the counts: {seen:?}");
    assert_eq!(
        codes(
            &client
                .should_rate_limit(user.clone())
                .await
                .unwrap()
                .into_inner()
        )
        .1,
        Code::Ok
    );
    process.signal("-TERM");
    process
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}

#[tokio::test]
async fn a_changed_rules_file_is_reloaded_without_a_signal() {
    let dir = TempDir::new("envoy-watch").unwrap();
    std::fs::write(dir.path().join("api.yaml"), RULES).unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\n\n[serve.envoy]\nrules = \"api.yaml\"\n",
    )
    .unwrap();
    let (_process, line, _stdout) = GatewayProcess::start("serve", &config, Stdio::null());
    let addr = line
        .strip_prefix("serve: listening on ")
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap()
        .to_owned();
    let mut client = RateLimitServiceClient::connect(addr).await.unwrap();
    let user = request("api", &[&[("user", "hank")]]);
    let limit_of = |answer: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit
    };
    let first = client
        .should_rate_limit(user.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(limit_of(&first), 5);
    std::fs::write(
        dir.path().join("api.yaml"),
        RULES.replace("requests_per_unit: 5", "requests_per_unit: 8"),
    )
    .unwrap();
    // Within a few looks at the file (one a second): no signal sent.
    let mut seen = 5;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = client
            .should_rate_limit(user.clone())
            .await
            .unwrap()
            .into_inner();
        seen = limit_of(&answer);
        if seen == 8 {
            break;
        }
    }
    assert_eq!(seen, 8, "the changed file was not reloaded");
}
