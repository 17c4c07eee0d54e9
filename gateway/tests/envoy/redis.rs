//! On Redis: all or nothing on standalone, Sentinel and Cluster; four instances sharing one
//! quota exactly; fail open and closed, the denial cache and the fallback when Redis is gone;
//! a reload that keeps the counts.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use testkit::RedisServer;
use tower_redis_ratelimit::admission::FailureMode;

use ratelimit_gateway::config::EnvoySettings;
use ratelimit_gateway::envoy::RateLimitService;

use crate::differences::{
    TWO_LIMITS, a_check_of_hits_addend_zero_counts_nothing, refused_requests_consume_no_other_limit,
};
use crate::support::{Files, ask, codes, header, redis_store, remaining, request};

const SHARED: &str = "
domain: shared
extensions: { store: shared }
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 50
";

#[tokio::test]
async fn a_refused_request_consumes_none_of_its_other_limits_on_redis() {
    let redis = RedisServer::start();
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], &redis_store(&redis.url()));
    refused_requests_consume_no_other_limit(&rules).await;
}

#[tokio::test]
async fn a_descriptors_own_hits_addend_of_zero_checks_without_counting_on_redis() {
    let redis = RedisServer::start();
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], &redis_store(&redis.url()));
    a_check_of_hits_addend_zero_counts_nothing(&rules).await;
}

#[tokio::test]
async fn four_instances_on_one_redis_admit_exactly_the_quota() {
    let redis = RedisServer::start();
    // Each instance with its own stores (connections, denial cache), as four processes have.
    let instances: Vec<Files> = (0..4)
        .map(|_| Files::new(&[("shared.yaml", SHARED)], &redis_store(&redis.url())))
        .collect();
    let services: Vec<_> = instances
        .iter()
        .map(|rules| rules.service(FailureMode::Closed))
        .collect();
    let tenant = request("shared", &[&[("tenant", "acme")]]);
    let asks = (0..200).map(|n| {
        let service = services[n % 4].clone();
        let tenant = tenant.clone();
        tokio::spawn(async move { codes(&ask(&service, &tenant).await).1 })
    });
    let mut admitted = 0;
    for answer in futures_util::future::join_all(asks).await {
        if answer.unwrap() == Code::Ok {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 50);
}

#[tokio::test]
async fn with_redis_gone_open_says_ok_and_closed_says_over_limit() {
    let mut redis = RedisServer::start();
    let rules = Files::new(&[("shared.yaml", SHARED)], &redis_store(&redis.url()));
    let open = rules.service(FailureMode::Open);
    let closed = rules.service(FailureMode::Closed);
    let tenant = request("shared", &[&[("tenant", "acme")]]);
    assert_eq!(codes(&ask(&open, &tenant).await).1, Code::Ok);
    redis.kill();
    let answer = ask(&open, &tenant).await;
    assert_eq!(codes(&answer), (vec![Code::Ok], Code::Ok));
    assert_eq!(header(&answer, "rate-limiting-state"), Some("Skipped"));
    let answer = ask(&closed, &tenant).await;
    assert_eq!(codes(&answer), (vec![Code::OverLimit], Code::OverLimit));
    assert_eq!(header(&answer, "retry-after"), Some("1"));
}

#[tokio::test]
async fn a_reload_keeps_the_counts() {
    let redis = RedisServer::start();
    let rules = Files::new(&[("shared.yaml", SHARED)], &redis_store(&redis.url()));
    let service = rules.service(FailureMode::Closed);
    let tenant = request("shared", &[&[("tenant", "acme")]]);
    for _ in 0..10 {
        ask(&service, &tenant).await;
    }
    // A file changed beside it (a new domain), and the stores rebuilt from the same settings.
    std::fs::write(
        rules.dir.path().join("other.yaml"),
        "domain: other\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n",
    )
    .unwrap();
    let limits = rules.config.rebuild(&rules.limits).unwrap();
    let settings = EnvoySettings {
        failure_mode: FailureMode::Closed,
        deadline: std::time::Duration::from_millis(500),
        headers: tower_redis_ratelimit::HeaderFamilies::DEFAULT,
    };
    let reloaded = RateLimitService::load(&rules.path(), settings, &limits).unwrap();
    assert_eq!(remaining(&ask(&reloaded, &tenant).await), vec![39]);
    let other = request("other", &[&[("k", "v")]]);
    assert_eq!(remaining(&ask(&reloaded, &other).await), vec![0]);
}

#[tokio::test]
async fn a_refused_request_consumes_none_of_its_other_limits_on_a_cluster() {
    let cluster = testkit::cluster::RedisCluster::start();
    let store = format!(
        "[stores.cluster]\ntype = \"cluster\"\nnodes = {}\nconnect_timeout = \"500ms\"\n",
        toml_list(&cluster.urls())
    );
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], &store);
    refused_requests_consume_no_other_limit(&rules).await;
    // Every counter of a domain carries the domain as its hash tag: one slot, one script call.
    let node = cluster.node(cluster.primary_for("{api}"));
    let keys = node.keys();
    assert!(
        !keys.is_empty() && keys.iter().all(|key| key.ends_with("{api}")),
        "{keys:?}"
    );
}

#[tokio::test]
async fn with_redis_gone_a_remembered_denial_still_refuses_and_a_fallback_decides() {
    let mut redis = RedisServer::start();
    let store = format!(
        "{}fallback = {{ instances = 2, timeout = \"100ms\" }}\n",
        redis_store(&redis.url())
    );
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], &store);
    let service = rules.service(FailureMode::Open);
    let user = request("api", &[&[("user", "ivy")]]);
    for _ in 0..3 {
        ask(&service, &user).await;
    }
    assert_eq!(codes(&ask(&service, &user).await).1, Code::OverLimit);
    redis.kill();
    // The denial cache answers for the refused user until its wait is over: no store call.
    let refused = ask(&service, &user).await;
    assert_eq!(codes(&refused).1, Code::OverLimit);
    // Another user is decided by the fallback, with its share of the quota (3 / 2 instances),
    // and says so.
    let other = request("api", &[&[("user", "jay")]]);
    let answer = ask(&service, &other).await;
    assert_eq!(codes(&answer).1, Code::Ok);
    assert_eq!(header(&answer, "rate-limiting-state"), Some("Degraded"));
}

#[tokio::test]
async fn a_refused_request_consumes_none_of_its_other_limits_under_sentinel() {
    // The reference's usual Sentinel set-up: `REDIS_AUTH` on the servers, no
    // `REDIS_SENTINEL_AUTH`.
    let sentinels = testkit::sentinel::RedisSentinels::start_with(&testkit::sentinel::Passwords {
        servers: Some("servers-secret".to_owned()),
        sentinels: None,
    });
    let store = format!(
        "[stores.ha]\ntype = \"sentinel\"\nsentinels = {}\nmaster = \"{}\"\n\
         primary_auth = {{ password = \"servers-secret\" }}\n",
        toml_list(&sentinels.urls()),
        testkit::sentinel::MASTER
    );
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], &store);
    refused_requests_consume_no_other_limit(&rules).await;
}

/// `urls` as a TOML array of strings.
pub(crate) fn toml_list(urls: &[String]) -> String {
    let quoted: Vec<String> = urls.iter().map(|url| format!("{url:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

const THREE_LIMITS: &str = "
domain: three
extensions: { store: shared }
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: route
    rate_limit:
      unit: hour
      requests_per_unit: 100
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 50
";

/// The commands Redis ran since `before` (a reading of `command_calls`), `INFO` left out.
fn ran_since(
    redis: &RedisServer,
    before: &std::collections::HashMap<String, u64>,
) -> Vec<(String, u64)> {
    let mut ran: Vec<(String, u64)> = redis
        .command_calls()
        .into_iter()
        .map(|(name, calls)| {
            let delta = calls - before.get(&name).copied().unwrap_or(0);
            (name, delta)
        })
        .filter(|(name, delta)| *delta > 0 && name != "info")
        .collect();
    ran.sort();
    ran
}

#[tokio::test]
async fn a_request_of_three_descriptors_is_one_script_call_and_no_read() {
    let redis = RedisServer::start();
    let rules = Files::new(&[("three.yaml", THREE_LIMITS)], &redis_store(&redis.url()));
    let service = rules.service(FailureMode::Closed);
    let three = request(
        "three",
        &[
            &[("user", "alice")],
            &[("route", "/orders")],
            &[("tenant", "acme")],
        ],
    );
    // The first call loads the functions and subscribes to resets: not what is counted.
    let first = ask(&service, &three).await;
    assert_eq!(remaining(&first), [1, 99, 49]);
    // A read of a descriptor would be a script call of its own (a check of cost 0); the
    // commands a script runs are counted under their own names.
    let script = |ran: &[(String, u64)]| {
        ran.iter()
            .filter(|(name, _)| testkit::commands::is_script_call(name))
            .map(|(_, calls)| calls)
            .sum::<u64>()
    };
    let before = redis.command_calls();
    let admitted = ask(&service, &three).await;
    assert_eq!(codes(&admitted).1, Code::Ok);
    assert_eq!(
        remaining(&admitted),
        [0, 98, 48],
        "each descriptor's own count"
    );
    let ran = ran_since(&redis, &before);
    assert_eq!(script(&ran), 1, "one call, no read: {ran:?}");
    // Refused by `user`: the others tell what they have left, uncounted, from the same call.
    let before = redis.command_calls();
    let refused = ask(&service, &three).await;
    assert_eq!(
        codes(&refused),
        (vec![Code::OverLimit, Code::Ok, Code::Ok], Code::OverLimit)
    );
    assert_eq!(remaining(&refused), [0, 98, 48]);
    let ran = ran_since(&redis, &before);
    assert_eq!(script(&ran), 1, "one call, no read: {ran:?}");
    // A denial the store remembers knows the refusing limit only: the two others are read.
    let before = redis.command_calls();
    let remembered = ask(&service, &three).await;
    assert_eq!(codes(&remembered), codes(&refused));
    assert_eq!(remaining(&remembered), [0, 98, 48]);
    let ran = ran_since(&redis, &before);
    assert_eq!(script(&ran), 2, "two reads: {ran:?}");
}
