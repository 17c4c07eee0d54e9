//! `ratelimit-gateway serve` run as a process with `[serve.envoy]`: the same listeners answer
//! Envoy's gRPC and the gateway endpoints; SIGHUP and a changed rules file reload the rules,
//! keeping the counts.

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use testkit::{RedisServer, TempDir};
use tonic::transport::Channel;

use crate::front::start_serve;
use crate::process::GatewayProcess;
use crate::support::{remaining, request, unix_client};

const RULES: &str = "
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 5
";

/// `RULES` with another limit.
fn rules(limit: u32) -> String {
    RULES.replace(
        "requests_per_unit: 5",
        &format!("requests_per_unit: {limit}"),
    )
}

/// Asks for user `user` until the answer's limit is `limit` (a reload took effect), for at most
/// six seconds; the last answer.
async fn until_limit(
    client: &mut RateLimitServiceClient<Channel>,
    user: &str,
    limit: u32,
) -> RateLimitResponse {
    let asked = request("api", &[&[("user", user)]]);
    let mut answer = RateLimitResponse::default();
    for _ in 0..60 {
        answer = client
            .should_rate_limit(asked.clone())
            .await
            .unwrap()
            .into_inner();
        let now = answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit;
        if now == limit {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no reload to a limit of {limit}: {answer:?}");
}

#[tokio::test]
async fn serve_answers_envoy_beside_the_gateway_endpoints_and_sighup_keeps_counts() {
    let redis = RedisServer::start();
    let dir = TempDir::new("envoy-serve").unwrap();
    for (name, limit) in [("rules", 5), ("raised", 10)] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("api.yaml"), rules(limit)).unwrap();
    }
    let config = dir.path().join("serve.toml");
    let file = |files: &str| {
        format!(
            "[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\n\n[serve]\nlisten = \"127.0.0.1:0\"\n\
             socket = \"{}\"\n# No load balancer to leave: exit once drained.\n             connections = {{ drain_delay = \"0s\" }}\n\n[serve.envoy]\nfiles = \"{files}\"\n",
            redis.url(),
            dir.path().join("rls.sock").display()
        )
    };
    std::fs::write(&config, file("rules")).unwrap();
    let (mut process, line, addr) = start_serve(&config, None);
    assert!(line.contains("envoy: 1 domains"), "{line}");
    let mut client = RateLimitServiceClient::connect(addr.clone()).await.unwrap();
    until_limit(&mut client, "frank", 5).await;
    until_limit(&mut client, "frank", 5).await;
    // On the Unix socket too, counting in the same store.
    let mut beside = unix_client(&dir.path().join("rls.sock")).await;
    assert_eq!(
        remaining(&until_limit(&mut beside, "frank", 5).await),
        vec![2]
    );
    // The gateway endpoints on the same listener.
    let plain = reqwest::get(format!("{addr}/auth_request")).await.unwrap();
    assert_ne!(plain.status(), reqwest::StatusCode::NOT_FOUND);
    // The file names other rules (a raised limit), and only SIGHUP reads the file: the three
    // requests made so far still count.
    std::fs::write(&config, file("raised")).unwrap();
    process.signal("-HUP");
    let answer = until_limit(&mut client, "frank", 10).await;
    // 6 when the first request after the signal was answered by the new rules; less when
    // some were answered (and counted) before; 9 had the counts been lost.
    assert!(
        remaining(&answer)[0] <= 6,
        "the reload kept the counts: {answer:?}"
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
        "[serve]\nlisten = \"127.0.0.1:0\"\n\n[serve.envoy]\nfiles = \"api.yaml\"\n",
    )
    .unwrap();
    let (_process, _, addr) = start_serve(&config, None);
    let mut client = RateLimitServiceClient::connect(addr).await.unwrap();
    until_limit(&mut client, "hank", 5).await;
    std::fs::write(dir.path().join("api.yaml"), rules(8)).unwrap();
    // Within a few looks at the file (one a second), no signal sent.
    let answer = until_limit(&mut client, "hank", 8).await;
    assert!(remaining(&answer)[0] < 7, "counts kept: {answer:?}");
}

/// Each question has an access log line (domain, descriptors, overall code, latency); a
/// domain the files do not have is answered OK and said once in a warning, not per question.
#[tokio::test]
async fn questions_are_logged_and_an_unknown_domain_is_warned_of_once() {
    let dir = TempDir::new("envoy-log").unwrap();
    std::fs::write(dir.path().join("api.yaml"), RULES).unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"json\"\n\n\
         [serve.envoy]\nfiles = \"api.yaml\"\n",
    )
    .unwrap();
    let (process, line, stdout) = GatewayProcess::start("serve", &config, None);
    let addr = line
        .strip_prefix("serve: listening on ")
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let mut client = RateLimitServiceClient::connect(addr).await.unwrap();
    let asked = [
        request("api", &[&[("user", "a")], &[("user", "b")]]),
        request("nope", &[&[("user", "a")]]),
        request("nope", &[&[("user", "a")]]),
    ];
    for question in asked {
        client.should_rate_limit(question).await.unwrap();
    }
    let lines: Vec<serde_json::Value> = (0..3)
        .map(|_| {
            let line = stdout.next_line();
            serde_json::from_str(&line).unwrap_or_else(|err| panic!("{line}: {err}"))
        })
        .collect();
    for (line, (domain, descriptors)) in lines.iter().zip([("api", 2), ("nope", 1), ("nope", 1)]) {
        assert_eq!(line["domain"], domain, "{line}");
        assert_eq!(line["descriptors"], descriptors, "{line}");
        assert_eq!(line["code"], "OK", "{line}");
        assert_eq!(line["decision"], "allowed", "{line}");
        assert_eq!(
            line["path"],
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
        );
        assert!(line["latency_ms"].as_f64().is_some(), "{line}");
    }
    // Every message until SIGTERM's (those of the questions come before it): the unknown
    // domain's warning once.
    process.signal("-TERM");
    let mut warnings = Vec::new();
    loop {
        let message = process.stderr.next_line();
        if message.contains("shutting down") {
            break;
        }
        if message.contains("a domain the Envoy files do not have") {
            warnings.push(message);
        }
    }
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let warning: serde_json::Value = serde_json::from_str(&warnings[0]).unwrap();
    assert_eq!(warning["domain"], "nope", "{warning}");
    assert_eq!(warning["level"], "WARN", "{warning}");
}

/// Envoy's failure counter, which the alert `RatelimitEnvoyErrors` reads, is on `/metrics` at 0
/// before any failure (docs/operations.md, "Alerts"), and a reload does not set it back.
#[tokio::test]
async fn an_envoy_service_exports_its_failure_count_from_the_start() {
    let dir = TempDir::new("envoy-metrics").unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules").join("api.yaml"), rules(5)).unwrap();
    let admin = crate::process::free_addr();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[serve]\nlisten = \"127.0.0.1:0\"\nadmin = \"{admin}\"\n\n[serve.envoy]\nfiles = \"rules\"\n"
        ),
    )
    .unwrap();
    let (process, _, _) = start_serve(&config, None);
    let scrape = async || {
        reqwest::get(format!("http://{admin}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let zero = "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} 0\n";
    assert!(scrape().await.contains(zero), "{}", scrape().await);
    process.signal("-HUP");
    process.message_containing("configuration reloaded");
    assert!(scrape().await.contains(zero), "{}", scrape().await);
}
