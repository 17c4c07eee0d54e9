//! Files the reference refuses are refused, with its message, the file and the field.

use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::config::{Format, LimitsConfig};

use crate::support::{Files, refused};
use ratelimit_gateway::config::EnvoySettings;
use ratelimit_gateway::envoy::RateLimitService;

#[test]
fn invalid_files_are_refused_with_the_file_the_field_and_the_references_message() {
    let limit = "rate_limit: { unit: second, requests_per_unit: 1 }";
    for (files, expected) in [
        (
            vec![("a.yaml", "domain: d\n"), ("b.yaml", "domain: d\n")],
            "b.yaml: `domain`: duplicate domain 'd' in config file (also ",
        ),
        (
            vec![("a.yaml", "descriptors: []\n")],
            "a.yaml: `domain`: config file cannot have empty domain",
        ),
        (
            vec![("a.yaml", "domain: d\ndescriptors:\n  - value: v\n")],
            "a.yaml: `descriptors[0].key`: descriptor has empty key",
        ),
        (
            vec![(
                "a.yaml",
                &*format!(
                    "domain: d\ndescriptors:\n  - key: k\n    {limit}\n  - key: k\n    {limit}\n"
                ),
            )],
            "a.yaml: `descriptors[1]`: duplicate descriptor composite key 'd.k'",
        ),
        (
            vec![(
                "a.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { name: n, unit: second, requests_per_unit: 1, replaces: [{ name: n }] }\n",
            )],
            "a.yaml: `descriptors[0].rate_limit.replaces[0].name`: replaces should not contain name of same descriptor",
        ),
        (
            vec![(
                "a.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, unit: second }\n",
            )],
            "a.yaml: `descriptors[0].rate_limit.unit`: should not specify rate limit unit when unlimited",
        ),
        (
            vec![(
                "a.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
            )],
            "a.yaml: `descriptors[0].rate_limit.unit`: invalid rate limit unit 'fortnight'",
        ),
        (
            vec![(
                "a.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n        rate_limit: { unit: second, requests_per_unit: 1, extensions: { algorithm: leaky } }\n",
            )],
            "a.yaml: `descriptors[0].descriptors[0].rate_limit.extensions.algorithm`: unknown algorithm 'leaky'",
        ),
        (
            vec![(
                "a.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1, extensions: { algorithm: gcra, max_delay: 1s } }\n",
            )],
            "a.yaml: `descriptors[0].rate_limit.extensions.max_delay`: Envoy's rate limit service answers at once and cannot make Envoy wait",
        ),
        (
            vec![(
                "a.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    shadow: true\n",
            )],
            "a.yaml: descriptors[0]: unknown field `shadow`",
        ),
        (
            vec![("a.yaml", "domain: d\nextensions: { store: nowhere }\n")],
            "a.yaml: `extensions.store`: no store named \"nowhere\" (there are none)",
        ),
    ] {
        let message = refused(&files);
        assert!(
            message.starts_with(expected),
            "{message:?} should start with {expected:?}"
        );
    }
}

#[test]
fn a_file_alone_loads_as_a_directory_does() {
    let rules = Files::new(
        &[("only.yaml", "domain: only\n"), ("notes.txt", "not yaml")],
        "",
    );
    let limits = LimitsConfig::parse("", Format::Toml)
        .unwrap()
        .build()
        .unwrap();
    let settings = EnvoySettings {
        failure_mode: FailureMode::Open,
        deadline: std::time::Duration::from_millis(100),
        headers: tower_redis_ratelimit::HeaderFamilies::DEFAULT,
    };
    let file = rules.dir.path().join("only.yaml");
    let service = RateLimitService::load(&file, settings, &limits).unwrap();
    assert_eq!(service.domains(), vec![("only".to_owned(), file)]);
    let from_dir = rules.service(FailureMode::Open);
    assert_eq!(
        from_dir.domains().len(),
        1,
        "only .yaml and .yml files are read"
    );
}

/// `gateway/examples/envoy.toml` and its rules are what `check` accepts and describes.
#[test]
fn the_example_checks_and_check_names_a_bad_rules_file_and_field() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/envoy.toml");
    let summary = ratelimit_gateway::check::check(&example).expect("the example is valid");
    assert!(
        summary.contains("domain edge_proxy_per_ip (") && summary.contains("ratelimit/edge.yaml"),
        "{summary}"
    );
    let rules = Files::new(
        &[(
            "bad.yaml",
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
        )],
        "",
    );
    let config = rules.dir.path().join("serve.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\n\n[serve.envoy]\nfiles = \".\"\n",
    )
    .unwrap();
    let err = ratelimit_gateway::check::check(&config)
        .expect_err("refused")
        .to_string();
    assert!(
        err.ends_with(
            "bad.yaml: `descriptors[0].rate_limit.unit`: invalid rate limit unit 'fortnight'"
        ),
        "{err}"
    );
}

/// The configuration gateway/docs/envoy.md opens with reads as the gateway's file (every field it names
/// exists).
#[test]
fn the_guides_configuration_reads() {
    let guide = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/envoy.md");
    let guide = std::fs::read_to_string(guide).unwrap();
    let toml = guide
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a TOML block");
    let dir = testkit::TempDir::new("envoy-guide").unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, toml).unwrap();
    let file = ratelimit_gateway::config::File::read(&path).unwrap();
    let envoy = file.tables.serve.unwrap().envoy.unwrap();
    // Read from the file's directory, as every path of the file is.
    assert_eq!(envoy.files, dir.path().join("ratelimit/config"));
    assert_eq!(
        envoy.settings().deadline,
        std::time::Duration::from_millis(100)
    );
}
