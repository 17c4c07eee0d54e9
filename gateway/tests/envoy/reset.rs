//! Lifting a ban of a descriptor: the reset names the counter the descriptor counts in (its
//! domain, its entries, a shared wildcard's pattern), and no other; on Redis, in every instance
//! sharing the store, each remembering the denial; and through `serve`'s admin address and
//! `ratelimit-gateway reset`.

use std::process::Command;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimit_gateway::envoy::RateLimitService;
use testkit::{RedisServer, TempDir};
use tower_redis_ratelimit::admission::FailureMode;

use crate::front::start_serve;
use crate::process::{BINARY, stdout_of};
use crate::support::{Files, ask, codes, redis_store, request};

/// Two a day per user; one an hour for every file at once (a shared wildcard: one counter).
const RULES: &str = "
domain: api
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: user
    rate_limit: { unit: day, requests_per_unit: 2 }
";

fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

async fn code(service: &RateLimitService, entries: &[(&str, &str)]) -> Code {
    codes(&ask(service, &request("api", &[entries])).await).1
}

/// Asks until the descriptor is admitted, for at most 10 s: another instance forgets its
/// remembered denial when it hears the reset.
async fn admitted_soon(service: &RateLimitService, entries: &[(&str, &str)]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while code(service, entries).await != Code::Ok {
        assert!(
            Instant::now() < deadline,
            "{entries:?} still over the limit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `first` and `second` share a store (or are one service).
async fn exactly_its_counter_is_reset(first: &RateLimitService, second: &RateLimitService) {
    let ann = [("user", "ann")];
    let bob = [("user", "bob")];
    for service in [first, second] {
        assert_eq!(code(service, &ann).await, Code::Ok);
        assert_eq!(code(service, &bob).await, Code::Ok);
    }
    for service in [first, second] {
        assert_eq!(code(service, &ann).await, Code::OverLimit);
        assert_eq!(code(service, &bob).await, Code::OverLimit);
    }
    let done = first.reset("api", &entries(&ann)).await.unwrap();
    assert_eq!(
        done,
        "reset the counter of descriptor user=ann in domain \"api\""
    );
    admitted_soon(first, &ann).await;
    admitted_soon(second, &ann).await;
    assert_eq!(code(first, &bob).await, Code::OverLimit);

    // A shared wildcard's one counter, reset by naming any value it matches.
    assert_eq!(code(first, &[("files", "files/a")]).await, Code::Ok);
    assert_eq!(code(second, &[("files", "files/b")]).await, Code::OverLimit);
    first
        .reset("api", &entries(&[("files", "files/other")]))
        .await
        .unwrap();
    admitted_soon(second, &[("files", "files/b")]).await;

    // What matches nothing is said so.
    for (domain, pairs) in [("web", &ann[..]), ("api", &[("team", "x")][..])] {
        let refused = first.reset(domain, &entries(pairs)).await.unwrap_err();
        assert!(
            matches!(refused, ratelimit_gateway::runtime::ResetError::Unknown(_)),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn a_reset_lifts_exactly_its_descriptors_counter_in_process() {
    let rules = Files::new(&[("api.yaml", RULES)], "");
    let service = rules.service(FailureMode::Open);
    exactly_its_counter_is_reset(&service, &service).await;
}

#[tokio::test]
async fn a_reset_lifts_exactly_its_descriptors_counter_in_every_instance_on_redis() {
    let redis = RedisServer::start();
    // Two instances: stores of their own, each with its denial cache, sharing Redis.
    let first = Files::new(&[("api.yaml", RULES)], &redis_store(&redis.url()));
    let second = Files::new(&[("api.yaml", RULES)], &redis_store(&redis.url()));
    exactly_its_counter_is_reset(
        &first.service(FailureMode::Open),
        &second.service(FailureMode::Open),
    )
    .await;
}

/// Per descriptor, a counter's key is its own (`placement`): the reset names it there.
#[tokio::test]
async fn a_reset_lifts_exactly_its_descriptors_counter_per_descriptor_on_redis() {
    let redis = RedisServer::start();
    let rules = RULES.replace(
        "domain: api\n",
        "domain: api\nextensions: { placement: per_descriptor }\n",
    );
    let first = Files::new(&[("api.yaml", &rules)], &redis_store(&redis.url()));
    let second = Files::new(&[("api.yaml", &rules)], &redis_store(&redis.url()));
    exactly_its_counter_is_reset(
        &first.service(FailureMode::Open),
        &second.service(FailureMode::Open),
    )
    .await;
}

/// `serve` with Envoy files: a descriptor reset through its admin address and from the command
/// line.
#[tokio::test]
async fn serve_resets_a_descriptor_through_the_admin_address_and_the_command_line() {
    let redis = RedisServer::start();
    let dir = TempDir::new("envoy-reset").unwrap();
    std::fs::write(dir.path().join("api.yaml"), RULES).unwrap();
    let admin = crate::process::free_addr();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[serve]\nlisten = \"127.0.0.1:0\"\nadmin = \"{admin}\"\naccess_log = \"off\"\n\n\
             [serve.envoy]\nfiles = \"{}\"\n",
            redis_store(&redis.url()),
            dir.path().display()
        ),
    )
    .unwrap();
    let (_process, _, addr) = start_serve(&config, None);
    let mut client = RateLimitServiceClient::connect(addr).await.unwrap();
    let mut over = async |expected: Code| {
        let asked = request("api", &[&[("user", "ann")]]);
        let answer = client.should_rate_limit(asked).await.unwrap().into_inner();
        assert_eq!(codes(&answer).1, expected, "{answer:?}");
    };
    over(Code::Ok).await;
    over(Code::Ok).await;
    over(Code::OverLimit).await;

    let body = r#"{"domain": "api", "descriptor": [{"key": "user", "value": "ann"}]}"#;
    let response = reqwest::Client::new()
        .post(format!("http://{admin}/reset"))
        .body(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    over(Code::Ok).await;
    over(Code::Ok).await;
    over(Code::OverLimit).await;

    let mut command = Command::new(BINARY);
    command.arg("reset").arg(&config);
    command.args(["--domain", "api", "--descriptor", "user=ann"]);
    assert_eq!(
        stdout_of(command).await,
        "reset the counter of descriptor user=ann in domain \"api\"\n"
    );
    over(Code::Ok).await;
}
