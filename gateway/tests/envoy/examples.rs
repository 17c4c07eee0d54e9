//! The examples of envoyproxy/ratelimit's README, their files unchanged, answering the requests
//! as it documents.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tower_redis_ratelimit::admission::FailureMode;

use crate::support::{Files, ask, codes, overall, remaining, request};

const EXAMPLE_2: &str = "
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
";

#[tokio::test]
async fn example_2_nested_descriptors_limit_each_number_and_every_message() {
    let rules = Files::new(&[("messaging.yaml", EXAMPLE_2)], "");
    let service = rules.service(FailureMode::Open);
    let both = request(
        "messaging",
        &[
            &[("message_type", "marketing"), ("to_number", "2061111111")],
            &[("to_number", "2061111111")],
        ],
    );
    for sent in 1..=5u32 {
        let answer = ask(&service, &both).await;
        assert_eq!(codes(&answer), (vec![Code::Ok, Code::Ok], Code::Ok));
        assert_eq!(remaining(&answer), vec![5 - sent, 100 - sent]);
        let limit = answer.statuses[0].current_limit.as_ref().unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (5, 4), "5 per DAY");
    }
    let answer = ask(&service, &both).await;
    assert_eq!(
        codes(&answer),
        (vec![Code::OverLimit, Code::Ok], Code::OverLimit)
    );
    // Each number has its own counters.
    let other = request(
        "messaging",
        &[&[("message_type", "marketing"), ("to_number", "2062222222")]],
    );
    assert_eq!(codes(&ask(&service, &other).await).1, Code::Ok);
    // A non-marketing message to the first number: its own 100, of which 5 are spent (the
    // refused request counted nothing).
    let plain = request("messaging", &[&[("to_number", "2061111111")]]);
    assert_eq!(remaining(&ask(&service, &plain).await), vec![94]);
}

const EXAMPLE_3: &str = "
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
";

#[tokio::test]
async fn example_3_a_value_match_wins_over_the_key_alone() {
    let rules = Files::new(&[("edge.yaml", EXAMPLE_3)], "");
    let service = rules.service(FailureMode::Open);
    let blocked = request("edge_proxy_per_ip", &[&[("remote_address", "50.0.0.5")]]);
    let answer = ask(&service, &blocked).await;
    assert_eq!(codes(&answer), (vec![Code::OverLimit], Code::OverLimit));
    assert_eq!(
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        0
    );
    let other = request("edge_proxy_per_ip", &[&[("remote_address", "50.0.0.1")]]);
    let answers = overall(&service, &other, 11).await;
    assert_eq!(answers[..10], [Code::Ok; 10]);
    assert_eq!(answers[10], Code::OverLimit);
}

#[tokio::test]
async fn example_4_a_descriptor_matches_only_at_its_depth() {
    let shallow = "
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
";
    let deep = "
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
";
    let two = request("example4", &[&[("key", "value"), ("subkey", "subvalue")]]);
    let rules = Files::new(&[("example4.yaml", shallow)], "");
    let answer = ask(&rules.service(FailureMode::Open), &two).await;
    assert!(answer.statuses[0].current_limit.is_none(), "no match");
    let rules = Files::new(&[("example4.yaml", deep)], "");
    let answer = ask(&rules.service(FailureMode::Open), &two).await;
    assert_eq!(
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        300
    );
    assert_eq!(remaining(&answer), vec![299]);
}

#[tokio::test]
async fn example_5_unlimited_is_answered_with_the_most_remaining() {
    let file = "
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
";
    let rules = Files::new(&[("internal.yaml", file)], "");
    let service = rules.service(FailureMode::Open);
    let both = request("internal", &[&[("ldap", "x")], &[("azure", "y")]]);
    let answer = ask(&service, &both).await;
    assert_eq!(codes(&answer), (vec![Code::Ok, Code::Ok], Code::Ok));
    assert_eq!(remaining(&answer), vec![u32::MAX, 99]);
    assert!(answer.statuses[0].current_limit.is_none());
}

#[tokio::test]
async fn example_6_shadow_mode_counts_and_never_refuses() {
    let file = "
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 2
          unit: minute
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 2
          unit: minute
";
    let rules = Files::new(&[("example6.yaml", file)], "");
    let service = rules.service(FailureMode::Open);
    let a = request(
        "example6",
        &[&[("service", "auth-service"), ("user", "user-a")]],
    );
    let b = request(
        "example6",
        &[&[("service", "auth-service"), ("user", "user-b")]],
    );
    assert_eq!(overall(&service, &a, 4).await, [Code::Ok; 4]);
    // Counted all the same: its remaining went down to 0.
    assert_eq!(remaining(&ask(&service, &a).await), vec![0]);
    let answers = [
        ask(&service, &b).await,
        ask(&service, &b).await,
        ask(&service, &b).await,
    ];
    assert_eq!(codes(&answers[2]), (vec![Code::OverLimit], Code::OverLimit));
    // A shadow limit tells the client nothing.
    let shadow = ask(&service, &a).await;
    assert!(shadow.response_headers_to_add.is_empty());
}

#[tokio::test]
async fn example_7_replaces_drops_the_replaced_limit_for_the_request() {
    let file = "
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
";
    let rules = Files::new(&[("example7.yaml", file)], "");
    let service = rules.service(FailureMode::Open);
    let one = [("key_1", "value_1"), ("user", "bkthomps")];
    let two = [("key_2", "value_2"), ("user", "bkthomps")];
    let both = request("example7", &[&one, &two]);
    assert_eq!(overall(&service, &both, 10).await, [Code::Ok; 10]);
    let answer = ask(&service, &both).await;
    assert_eq!(
        codes(&answer),
        (vec![Code::Ok, Code::OverLimit], Code::OverLimit)
    );
    assert!(answer.statuses[0].current_limit.is_none(), "replaced");
    // The replaced limit was not touched: its 5 are all there.
    let alone = request("example7", &[&one]);
    assert_eq!(remaining(&ask(&service, &alone).await), vec![4]);
}

#[tokio::test]
async fn example_9_wildcards_match_prefixes_and_middles() {
    let file = "
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 7
";
    let rules = Files::new(&[("example9.yaml", file)], "");
    let service = rules.service(FailureMode::Open);
    let limit_of = |answer: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        answer.statuses[0]
            .current_limit
            .as_ref()
            .map(|limit| limit.requests_per_unit)
    };
    for (entries, limit) in [
        (("key1", "value1"), Some(20)),
        (("key1", "valueXYZ"), Some(20)),
        (("key1", "other"), None),
        (("path", "/api/123/action"), Some(7)),
        (("path", "/api/123/other"), None),
    ] {
        let answer = ask(&service, &request("example9", &[&[entries]])).await;
        assert_eq!(limit_of(&answer), limit, "{entries:?}");
    }
    // Each value a wildcard matches has its own counter.
    let again = ask(&service, &request("example9", &[&[("key1", "value1")]])).await;
    assert_eq!(remaining(&again), vec![18]);
}

#[tokio::test]
async fn example_11_share_threshold_counts_every_match_together() {
    let file = "
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
";
    let rules = Files::new(&[("example11.yaml", file)], "");
    let service = rules.service(FailureMode::Open);
    for name in ["a.pdf", "b.csv"] {
        for _ in 0..5 {
            let shared = request("example11", &[&[("files", &format!("files/{name}"))]]);
            assert_eq!(codes(&ask(&service, &shared).await).1, Code::Ok);
            let own = request(
                "example11",
                &[&[("files_no_share", &format!("files_no_share/{name}"))]],
            );
            assert_eq!(codes(&ask(&service, &own).await).1, Code::Ok);
        }
    }
    let third = request("example11", &[&[("files", "files/c.txt")]]);
    assert_eq!(codes(&ask(&service, &third).await).1, Code::OverLimit);
    let own = request(
        "example11",
        &[&[("files_no_share", "files_no_share/a.pdf")]],
    );
    assert_eq!(remaining(&ask(&service, &own).await), vec![4]);
}
