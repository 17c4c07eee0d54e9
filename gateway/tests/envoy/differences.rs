//! Where this service differs from the reference on purpose: a request refused by one limit
//! consumes none of the others; every algorithm, a burst and any period; the crate's headers;
//! and what it shares with it: `hits_addend`, a descriptor's own limit, the metrics.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::UInt64Value;
use metrics_exporter_prometheus::PrometheusBuilder;
use ratelimit_gateway::envoy::placement::Placement;
use tower_redis_ratelimit::admission::FailureMode;

use crate::support::{Files, ask, codes, descriptor, header, overall, remaining, request};

pub(crate) const TWO_LIMITS: &str = "
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: route
    rate_limit:
      unit: hour
      requests_per_unit: 100
";

/// The all-or-nothing check, against whichever store `rules` has.
pub(crate) async fn refused_requests_consume_no_other_limit(rules: &Files) {
    refused_requests(rules, Placement::AllOrNothing).await;
}

/// Alice's requests of [`TWO_LIMITS`], each with the route `/orders`, against whichever store
/// `rules` has: three admitted, then five refused by her limit, which count nothing on it. All
/// or nothing, they spend nothing on the route either; per descriptor (its domain so placed),
/// the route counts each, as the reference does.
pub(crate) async fn refused_requests(rules: &Files, placement: Placement) {
    let service = rules.service(FailureMode::Closed);
    assert_eq!(service.placement("api"), Some(placement));
    let both = request("api", &[&[("user", "alice")], &[("route", "/orders")]]);
    for sent in 1..=3u32 {
        let answer = ask(&service, &both).await;
        assert_eq!(codes(&answer).1, Code::Ok);
        assert_eq!(remaining(&answer), vec![3 - sent, 100 - sent]);
    }
    let spent_by_refusals = |refused: u32| match placement {
        Placement::AllOrNothing => 0,
        Placement::PerDescriptor => refused,
    };
    for refused in 1..=5 {
        let answer = ask(&service, &both).await;
        assert_eq!(
            codes(&answer),
            (vec![Code::OverLimit, Code::Ok], Code::OverLimit)
        );
        assert_eq!(
            remaining(&answer),
            vec![0, 97 - spent_by_refusals(refused)],
            "{placement:?}: what the refused requests spent of the route's limit"
        );
    }
    let route = request("api", &[&[("route", "/orders")]]);
    assert_eq!(
        remaining(&ask(&service, &route).await),
        vec![96 - spent_by_refusals(5)]
    );
}

#[tokio::test]
async fn a_refused_request_consumes_none_of_its_other_limits() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    refused_requests_consume_no_other_limit(&rules).await;
}

#[tokio::test]
async fn every_algorithm_burst_and_period_is_one_line_of_extension() {
    let file = "
domain: ext
descriptors:
  - key: bucket
    rate_limit:
      unit: minute
      requests_per_unit: 60
      extensions: { algorithm: gcra, burst: 2 }
  - key: rolling
    rate_limit:
      requests_per_unit: 3
      extensions: { algorithm: sliding_log, period: 90s }
";
    let rules = Files::new(&[("ext.yaml", file)], "");
    let service = rules.service(FailureMode::Open);
    let bucket = request("ext", &[&[("bucket", "b")]]);
    let burst = overall(&service, &bucket, 3).await;
    assert_eq!(burst, [Code::Ok, Code::Ok, Code::OverLimit], "a burst of 2");
    let rolling = request("ext", &[&[("rolling", "r")]]);
    assert_eq!(overall(&service, &rolling, 3).await, [Code::Ok; 3]);
    let answer = ask(&service, &rolling).await;
    assert_eq!(codes(&answer).1, Code::OverLimit);
    let limit = answer.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (3, 0),
        "90s is no unit: UNKNOWN"
    );
    let reset = answer.statuses[0].duration_until_reset.as_ref().unwrap();
    assert!((80..=90).contains(&reset.seconds), "{reset:?}");
}

#[tokio::test]
async fn hits_addend_is_the_cost_and_zero_is_one() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let service = rules.service(FailureMode::Open);
    let mut heavy = request("api", &[&[("route", "/bulk")]]);
    heavy.hits_addend = 40;
    assert_eq!(remaining(&ask(&service, &heavy).await), vec![60]);
    heavy.hits_addend = 0;
    assert_eq!(remaining(&ask(&service, &heavy).await), vec![59]);
    // A descriptor's own hits_addend wins over the request's.
    let mut own = descriptor(&[("route", "/bulk")]);
    own.hits_addend = Some(UInt64Value { value: 9 });
    heavy.descriptors = vec![own];
    assert_eq!(remaining(&ask(&service, &heavy).await), vec![50]);
    heavy.hits_addend = 51;
    heavy.descriptors = vec![descriptor(&[("route", "/bulk")])];
    let answer = ask(&service, &heavy).await;
    assert_eq!(codes(&answer).1, Code::OverLimit, "51 > 50 left");
    // The status and the header tell one story: 50 remain (the refusal counted nothing).
    assert_eq!(remaining(&answer), vec![50]);
    assert_eq!(
        header(&answer, "ratelimit").map(|line| line.starts_with("\"route\";r=50;t=")),
        Some(true),
        "{answer:?}"
    );
    heavy.hits_addend = 50;
    assert_eq!(
        codes(&ask(&service, &heavy).await).1,
        Code::Ok,
        "nothing spent by the refusal"
    );
}

/// The reference's `/tokenquota`: a descriptor's own `hits_addend` of 0 asks whether its limit
/// is over and counts nothing; the hits come later, in a request of their own. Only the
/// request's `hits_addend` of 0 means one hit. Against whichever store `rules` has.
pub(crate) async fn a_check_of_hits_addend_zero_counts_nothing(rules: &Files) {
    let service = rules.service(FailureMode::Closed);
    let mut check = descriptor(&[("user", "hank")]);
    check.hits_addend = Some(UInt64Value { value: 0 });
    let mut checked = request("api", &[]);
    checked.hits_addend = 5;
    checked.descriptors = vec![check.clone()];
    for _ in 0..4 {
        let answer = ask(&service, &checked).await;
        assert_eq!(codes(&answer), (vec![Code::Ok], Code::Ok));
        assert_eq!(remaining(&answer), vec![3], "nothing counted");
    }
    // Beside a counted descriptor (another cost, another step) it counts nothing either.
    let mut both = request("api", &[&[("route", "/tokens")]]);
    both.descriptors.push(check);
    assert_eq!(remaining(&ask(&service, &both).await), vec![99, 3]);
    let spend = request("api", &[&[("user", "hank")]]);
    assert_eq!(overall(&service, &spend, 3).await, [Code::Ok; 3]);
    let answer = ask(&service, &checked).await;
    assert_eq!(
        (codes(&answer), remaining(&answer)),
        ((vec![Code::Ok], Code::Ok), vec![0]),
        "at the limit, not over it: the reference's check says OK too"
    );
    assert_eq!(codes(&ask(&service, &spend).await).1, Code::OverLimit);
}

#[tokio::test]
async fn a_descriptors_own_hits_addend_of_zero_checks_without_counting() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    a_check_of_hits_addend_zero_counts_nothing(&rules).await;
}

#[tokio::test]
async fn a_descriptors_own_limit_overrides_the_files() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let service = rules.service(FailureMode::Open);
    let mut overridden = descriptor(&[("user", "bob")]);
    overridden.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 2, // MINUTE
    });
    let mut asked = request("api", &[]);
    asked.descriptors = vec![overridden];
    let answer = ask(&service, &asked).await;
    let limit = answer.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit, limit.unit), (1, 2));
    assert_eq!(codes(&ask(&service, &asked).await).1, Code::OverLimit);
    // The file's limit of the same entries is another counter.
    let plain = request("api", &[&[("user", "bob")]]);
    assert_eq!(remaining(&ask(&service, &plain).await), vec![2]);
}

#[tokio::test]
async fn the_crates_headers_go_to_envoy_and_retry_after_on_a_refusal() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let service = rules.service(FailureMode::Open);
    // A request of 5 against a fresh limit of 3 is never admitted, and leaves all 3.
    let mut five = request("api", &[&[("user", "dave")]]);
    five.hits_addend = 5;
    let never = ask(&service, &five).await;
    assert_eq!(codes(&never).1, Code::OverLimit);
    assert_eq!(remaining(&never), vec![3]);
    assert_eq!(
        header(&never, "ratelimit").map(|line| line.starts_with("\"user\";r=3;t=")),
        Some(true),
        "{never:?}"
    );
    let user = request("api", &[&[("user", "carol")]]);
    let answer = ask(&service, &user).await;
    assert_eq!(
        header(&answer, "ratelimit-policy"),
        Some("\"user\";q=3;w=3600")
    );
    assert_eq!(
        header(&answer, "ratelimit").map(|line| line.starts_with("\"user\";r=2;t=")),
        Some(true)
    );
    assert_eq!(header(&answer, "rate-limiting-state"), Some("Allow"));
    assert_eq!(header(&answer, "retry-after"), None);
    ask(&service, &user).await;
    ask(&service, &user).await;
    let refused = ask(&service, &user).await;
    let retry: u64 = header(&refused, "retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&retry), "{retry}");
    // No value of the request in any header: values are often who sent them.
    assert!(
        refused
            .response_headers_to_add
            .iter()
            .all(|header| !header.value.contains("carol"))
    );
}

#[test]
fn the_references_counters_are_exported_with_its_names_and_labels() {
    let file = "
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: parent
    descriptors:
      - key: child
        rate_limit:
          unit: minute
          requests_per_unit: 5
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        rate_limit:
          unit: minute
          requests_per_unit: 60
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
  - key: remote_address
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 60
";
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let rules = Files::new(&[("example8.yaml", file)], "");
            let service = rules.service(FailureMode::Open);
            for _ in 0..3 {
                ask(
                    &service,
                    &request("example8", &[&[("key1", "unspecified_value")]]),
                )
                .await;
            }
            ask(&service, &request("example8", &[&[("key1", "value1")]])).await;
            ask(
                &service,
                &request("example8", &[&[("parent", "p"), ("child", "c")]]),
            )
            .await;
            let example10 = [
                ("route", "api"),
                ("http_method", "GET"),
                ("subject_id", "123"),
            ];
            ask(&service, &request("example8", &[&example10])).await;
            // Two levels: the same series as the three of example 10, as the mapping makes it.
            ask(&service, &request("example8", &[&example10[..2]])).await;
            for address in ["10.0.0.1", "2001:db8::1"] {
                let from = [("remote_address", address)];
                ask(&service, &request("example8", &[&from])).await;
            }
        })
    });
    let text = handle.render();
    let has = |line: &str| text.lines().any(|l| l == line);
    for line in [
        r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="key1_unspecified_value"} 3"#,
        r#"ratelimit_service_rate_limit_within_limit{domain="example8",key1="key1_unspecified_value"} 2"#,
        r#"ratelimit_service_rate_limit_near_limit{domain="example8",key1="key1_unspecified_value"} 1"#,
        r#"ratelimit_service_rate_limit_over_limit{domain="example8",key1="key1_unspecified_value"} 1"#,
        r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="key1_value1"} 1"#,
        r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="parent",key2="child"} 1"#,
        // README's example 10: the request's values where `value_to_metric` says; `key2` is
        // the second level alone (the mapping's `$3`: the deeper levels are dropped).
        r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="route_api",key2="http_method_GET"} 2"#,
        // The statsd name sanitised first: `:` and `|` to `_`, and an IPv4 address's dots,
        // which would otherwise split it into levels.
        r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="remote_address_10_0_0_1"} 1"#,
        r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="remote_address_2001_db8__1"} 1"#,
    ] {
        assert!(has(line), "{line} missing from:\n{text}");
    }
}

#[tokio::test]
async fn an_unknown_domain_limits_nothing_and_many_descriptors_are_decided_in_steps() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let service = rules.service(FailureMode::Open);
    let unknown = ask(&service, &request("nowhere", &[&[("user", "x")]])).await;
    assert_eq!(codes(&unknown), (vec![Code::Ok], Code::Ok));
    assert!(unknown.statuses[0].current_limit.is_none());
    // Ten users in one request: more than one policy holds (eight), each counted once.
    let users: Vec<String> = (0..10).map(|n| format!("u{n}")).collect();
    let entries: Vec<[(&str, &str); 1]> =
        users.iter().map(|user| [("user", user.as_str())]).collect();
    let descriptors: Vec<&[(&str, &str)]> = entries.iter().map(|entry| &entry[..]).collect();
    let many = request("api", &descriptors);
    let answer = ask(&service, &many).await;
    assert_eq!(codes(&answer).1, Code::Ok);
    assert_eq!(remaining(&answer), vec![2; 10]);
}

#[tokio::test]
async fn a_descriptor_sent_twice_counts_twice() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let service = rules.service(FailureMode::Open);
    let twice = request("api", &[&[("user", "gina")], &[("user", "gina")]]);
    let answer = ask(&service, &twice).await;
    assert_eq!(codes(&answer), (vec![Code::Ok, Code::Ok], Code::Ok));
    assert_eq!(remaining(&answer), vec![2, 1]);
    let answer = ask(&service, &twice).await;
    assert_eq!(
        codes(&answer).1,
        Code::OverLimit,
        "3 of 3 spent, then refused"
    );
    let once = request("api", &[&[("user", "gina")]]);
    assert_eq!(codes(&ask(&service, &once).await).1, Code::OverLimit);
}

#[tokio::test]
async fn a_request_of_too_many_descriptors_is_refused_as_invalid() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let service = rules.service(FailureMode::Open);
    let users: Vec<String> = (0..=ratelimit_gateway::envoy::MAX_DESCRIPTORS)
        .map(|n| format!("u{n}"))
        .collect();
    let entries: Vec<[(&str, &str); 1]> =
        users.iter().map(|user| [("user", user.as_str())]).collect();
    let descriptors: Vec<&[(&str, &str)]> = entries.iter().map(|entry| &entry[..]).collect();
    let refused = service
        .should_rate_limit(&request("api", &descriptors))
        .await
        .expect_err("more descriptors than the bound");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    // Nothing was counted: the first user still has the whole limit.
    let first = ask(&service, &request("api", &[&[("user", "u0")]])).await;
    assert_eq!(remaining(&first), vec![2]);
}
