//! A domain's placement (`extensions.placement`): `all_or_nothing` (every counter under the
//! domain, one Cluster slot, a request decided in one step) beside `per_descriptor` (each
//! counter in a slot of its own, each descriptor decided on its own, as the reference does).
//! Counts exact under both, in process, on Redis and on a 3-primary Cluster; a domain's keys
//! spread over the primaries; a refused request spending the descriptors that admitted it; the
//! calls of one request sent at once; the setting read, refused when wrong, and described by
//! `check`.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::UInt64Value;
use ratelimit_gateway::envoy::placement::Placement;
use testkit::RedisServer;
use testkit::cluster::RedisCluster;
use tower_redis_ratelimit::admission::FailureMode;

use crate::differences::{TWO_LIMITS, refused_requests};
use crate::redis::toml_list;
use crate::support::{Files, ask, codes, redis_store, refused, remaining, request};

/// [`TWO_LIMITS`] (user: 3 an hour, route: 100 an hour) decided per descriptor.
fn two_limits_per_descriptor() -> String {
    TWO_LIMITS.replace(
        "domain: api\n",
        "domain: api\nextensions: { placement: per_descriptor }\n",
    )
}

/// A tenant's 50 an hour and a route's 1,000, in a domain of each placement.
fn shared_limits(store: Option<&str>) -> Vec<(String, String)> {
    let store = store.map_or(String::new(), |store| format!("store: {store}, "));
    ["all_or_nothing", "per_descriptor"]
        .into_iter()
        .map(|placement| {
            let yaml = format!(
                "domain: {placement}\nextensions: {{ {store}placement: {placement} }}\n\
                 descriptors:\n  - key: tenant\n    rate_limit: {{ unit: hour, requests_per_unit: 50 }}\n\
                 \x20 - key: route\n    rate_limit: {{ unit: hour, requests_per_unit: 1000 }}\n"
            );
            (format!("{placement}.yaml"), yaml)
        })
        .collect()
}

/// Per descriptor, a request refused by one limit is counted by the one that admitted it, as
/// the reference counts it; the refusing limit counts nothing (a refusal writes nothing).
async fn refused_requests_spend_the_admitting_descriptors(rules: &Files) {
    refused_requests(rules, Placement::PerDescriptor).await;
}

#[tokio::test]
async fn per_descriptor_a_refused_request_spends_the_other_limits_in_process() {
    let rules = Files::new(&[("api.yaml", &two_limits_per_descriptor())], "");
    refused_requests_spend_the_admitting_descriptors(&rules).await;
}

#[tokio::test]
async fn per_descriptor_a_refused_request_spends_the_other_limits_on_redis() {
    let redis = RedisServer::start();
    let rules = Files::new(
        &[("api.yaml", &two_limits_per_descriptor())],
        &redis_store(&redis.url()),
    );
    refused_requests_spend_the_admitting_descriptors(&rules).await;
}

/// 200 requests at once, spread over four instances, each of the tenant (50 an hour) and a
/// route (1,000): 50 admitted under either placement; the route counted 50 times all or
/// nothing (the refused requests spent nothing), 200 times per descriptor (each request
/// admitted by the route is counted by it). Read after by a check that counts nothing.
async fn counts_are_exact_under_both_placements(instances: &[Files]) {
    let services: Vec<_> = instances
        .iter()
        .map(|rules| rules.service(FailureMode::Closed))
        .collect();
    for (domain, route_counted) in [("all_or_nothing", 50), ("per_descriptor", 200)] {
        let both = request(domain, &[&[("tenant", "acme")], &[("route", "/orders")]]);
        let asks = (0..200).map(|n| {
            let service = services[n % services.len()].clone();
            let both = both.clone();
            tokio::spawn(async move { codes(&ask(&service, &both).await).1 })
        });
        let answers = futures_util::future::join_all(asks).await;
        let admitted = answers
            .into_iter()
            .filter(|answer| *answer.as_ref().unwrap() == Code::Ok)
            .count();
        assert_eq!(admitted, 50, "{domain}");
        let answer = ask(&services[0], &check_only(&both)).await;
        assert_eq!(
            remaining(&answer),
            vec![0, 1000 - route_counted],
            "{domain}: each descriptor's own count"
        );
    }
}

/// `request` with each descriptor's own `hits_addend` of 0: a check that counts nothing.
fn check_only(request: &RateLimitRequest) -> RateLimitRequest {
    let mut check = request.clone();
    for descriptor in &mut check.descriptors {
        descriptor.hits_addend = Some(UInt64Value { value: 0 });
    }
    check
}

#[tokio::test]
async fn counts_are_exact_per_descriptor_under_both_placements_on_redis() {
    let redis = RedisServer::start();
    let files = shared_limits(Some("shared"));
    let files: Vec<(&str, &str)> = files.iter().map(|(n, y)| (&**n, &**y)).collect();
    let instances: Vec<Files> = (0..4)
        .map(|_| Files::new(&files, &redis_store(&redis.url())))
        .collect();
    counts_are_exact_under_both_placements(&instances).await;
}

/// The TOML of a store named `cluster` on `cluster`.
fn cluster_store(cluster: &RedisCluster) -> String {
    format!(
        "[stores.cluster]\ntype = \"cluster\"\nnodes = {}\nconnect_timeout = \"500ms\"\n",
        toml_list(&cluster.urls())
    )
}

/// On a 3-primary Cluster: exact counts under both placements, the refused request's
/// semantics per descriptor, and where the keys are: all or nothing, every key of the domain
/// on the primary of its slot; per descriptor, spread over all three, each key on the primary
/// `CLUSTER KEYSLOT` names for it.
#[tokio::test]
async fn on_a_cluster_per_descriptor_spreads_a_domain_over_every_primary_and_counts_exactly() {
    let cluster = RedisCluster::start();
    let store = cluster_store(&cluster);
    let files = shared_limits(Some("cluster"));
    let files: Vec<(&str, &str)> = files.iter().map(|(n, y)| (&**n, &**y)).collect();
    let instances: Vec<Files> = (0..4).map(|_| Files::new(&files, &store)).collect();
    counts_are_exact_under_both_placements(&instances).await;
    let rules = Files::new(&[("api.yaml", &two_limits_per_descriptor())], &store);
    refused_requests_spend_the_admitting_descriptors(&rules).await;

    // 30 users of each domain, one descriptor each: 30 counters.
    let service = instances[0].service(FailureMode::Closed);
    for domain in ["all_or_nothing", "per_descriptor"] {
        for user in 0..30 {
            let tenant = format!("tenant-{user}");
            let answer = ask(&service, &request(domain, &[&[("tenant", &tenant)]])).await;
            assert_eq!(codes(&answer).1, Code::Ok);
        }
    }
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    let mut per_descriptor_on = Vec::new();
    for &primary in &primaries {
        let keys = cluster.node(primary).keys();
        for key in &keys {
            assert_eq!(
                cluster.primary_for(key),
                primary,
                "{key} on its slot's primary"
            );
        }
        let together: Vec<&String> = keys
            .iter()
            .filter(|key| key.ends_with("{all_or_nothing}"))
            .collect();
        if !together.is_empty() {
            assert_eq!(
                primary,
                cluster.primary_for("{all_or_nothing}"),
                "{together:?}"
            );
        }
        let apart = keys
            .iter()
            .filter(|key| key.contains("{per_descriptor:e."))
            .count();
        per_descriptor_on.push(apart);
    }
    // 32 counters (30 tenants, acme's, /orders's): each primary holds some of them.
    assert_eq!(
        per_descriptor_on.iter().sum::<usize>(),
        32,
        "{per_descriptor_on:?}"
    );
    assert!(
        per_descriptor_on.iter().all(|&keys| keys > 0),
        "every primary holds counters of the domain: {per_descriptor_on:?}"
    );
    let dbsizes: Vec<u64> = primaries
        .iter()
        .map(|&primary| cluster.node(primary).cli(&["DBSIZE"]).parse().unwrap())
        .collect();
    assert!(dbsizes.iter().all(|&keys| keys > 0), "{dbsizes:?}");
}

/// The calls of one request go to Redis at once: behind a link adding 100 ms each way, a
/// request of three descriptors answers in about one round trip (200 ms), never the three it
/// would take one after another (600 ms).
#[tokio::test]
async fn per_descriptor_the_calls_of_one_request_are_one_round_trip() {
    let redis = RedisServer::start();
    let link = testkit::wan::WanLink::start(redis.addr(), Duration::from_millis(100));
    let yaml = "domain: three\nextensions: { placement: per_descriptor }\ndescriptors:\n\
                \x20 - key: user\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n\
                \x20 - key: route\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n\
                \x20 - key: tenant\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n";
    let store = format!(
        "[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\nconnect_timeout = \"2s\"\n",
        link.url()
    );
    let rules = Files::new(&[("three.yaml", yaml)], &store);
    let service = rules.service_within(FailureMode::Closed, Duration::from_secs(5));
    let three = |user: &str| {
        request(
            "three",
            &[&[("user", user)], &[("route", "/r")], &[("tenant", "t")]],
        )
    };
    // The first request connects, loads the functions and subscribes to resets.
    assert_eq!(remaining(&ask(&service, &three("warm")).await), [9, 9, 9]);
    let started = Instant::now();
    let answer = ask(&service, &three("timed")).await;
    let took = started.elapsed();
    assert_eq!(remaining(&answer), [9, 8, 8]);
    assert!(
        took < Duration::from_millis(400),
        "three calls in one round trip of 200 ms, not one after another: {took:?}"
    );
}

#[test]
fn the_placement_is_read_and_a_wrong_one_refused_by_name() {
    let rules = Files::new(&[("api.yaml", &two_limits_per_descriptor())], "");
    let service = rules.service(FailureMode::Open);
    assert_eq!(service.placement("api"), Some(Placement::PerDescriptor));
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    assert_eq!(
        rules.service(FailureMode::Open).placement("api"),
        Some(Placement::AllOrNothing),
        "all or nothing unless the file says otherwise"
    );
    let message = refused(&[(
        "bad.yaml",
        "domain: d\nextensions: { placement: sideways }\n",
    )]);
    assert!(
        message.starts_with(
            "bad.yaml: extensions.placement: unknown variant `sideways`, expected \
             `all_or_nothing` or `per_descriptor`"
        ),
        "{message}"
    );
}

#[test]
fn check_names_each_domains_placement() {
    let files = shared_limits(None);
    let files: Vec<(&str, &str)> = files.iter().map(|(n, y)| (&**n, &**y)).collect();
    let rules = Files::new(&files, "");
    let config = rules.dir.path().join("serve.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\n\n[serve.envoy]\nfiles = \".\"\n",
    )
    .unwrap();
    let summary = ratelimit_gateway::check::check(&config).expect("valid");
    for expected in [
        "domain all_or_nothing (",
        "all_or_nothing.yaml), placement all_or_nothing: a request's descriptors decided \
         together, every counter in the domain's slot",
        "per_descriptor.yaml), placement per_descriptor: each descriptor decided on its own, \
         its counter in a slot of its own",
    ] {
        assert!(summary.contains(expected), "{expected:?} in {summary}");
    }
}

/// The extensions example of gateway/docs/envoy.md loads as the page shows it, and with the
/// other placement its comment names.
#[test]
fn the_guides_extensions_example_loads_with_either_placement() {
    let guide = include_str!("../../docs/envoy.md");
    let example = guide
        .split("## Extensions")
        .nth(1)
        .and_then(|rest| rest.split("```yaml\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the extensions example");
    let store = "[stores.shared]\ntype = \"memory\"\n";
    for (yaml, placement) in [
        (example.to_owned(), Placement::AllOrNothing),
        (
            example.replace("placement: all_or_nothing", "placement: per_descriptor"),
            Placement::PerDescriptor,
        ),
    ] {
        let rules = Files::new(&[("api.yaml", &yaml)], store);
        let service = rules.service(FailureMode::Open);
        assert_eq!(service.placement("api"), Some(placement));
    }
}
