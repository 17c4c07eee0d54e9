//! Limits from a configuration file: the example files in TOML, YAML and JSON say the same thing
//! and build; a layer built from a file limits as one built in code; every mistake names its
//! field.

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::config::LimitsConfig;

use crate::support::{header, timed_get};

const PEER: &str = "203.0.113.7:4000";

fn example(name: &str) -> String {
    let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

#[test]
fn the_example_files_say_the_same_in_toml_yaml_and_json_and_build() {
    let toml: LimitsConfig = toml::from_str(&example("limits.toml")).unwrap();
    let yaml: LimitsConfig = serde_yaml_ng::from_str(&example("limits.yaml")).unwrap();
    let json: LimitsConfig = serde_json::from_str(&example("limits.json")).unwrap();
    assert_eq!(toml, yaml);
    assert_eq!(toml, json);
    let limits = toml.build().unwrap();
    let routes: Vec<&str> = limits.layers().map(|(name, _)| name).collect();
    assert_eq!(routes, ["api", "login", "reports"]);
    let routes_for = |path| limits.routes_for(path).map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(routes_for("/api/v1/users"), ["api"]);
    assert_eq!(routes_for("/login"), ["login"]);
    assert!(routes_for("/health").is_empty());
    let concurrency: Vec<&str> = limits.concurrency_layers().map(|(name, _)| name).collect();
    assert_eq!(concurrency, ["reports-in-flight"]);
    let concurrency_for = |path| {
        limits
            .concurrency_for(path)
            .map(|r| r.0)
            .collect::<Vec<_>>()
    };
    assert_eq!(concurrency_for("/reports/daily"), ["reports-in-flight"]);
    assert!(concurrency_for("/api/v1/users").is_empty());
}

/// A concurrency limit from a file holds a slot per request until its response body is done.
#[tokio::test]
async fn a_concurrency_limit_from_a_file_holds_slots_until_the_body_is_done() {
    use tower::ServiceExt;
    let config: LimitsConfig = toml::from_str(
        r#"
        [concurrency.exports]
        max_in_flight = 1
        key = { header = "x-client" }
        "#,
    )
    .unwrap();
    let limits = config.build().unwrap();
    let app = Router::new()
        .route("/", get(|| async { "export" }))
        .layer(limits.concurrency_layer("exports").unwrap().clone());
    let request = |client: &str| {
        http::Request::get("/")
            .header("x-client", client)
            .body(axum::body::Body::empty())
            .unwrap()
    };
    // The first response's body is not read yet: its slot is taken.
    let first = app.clone().oneshot(request("a")).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(
        header(&first, "ratelimit-policy"),
        r#""exports";q=1;qu="concurrent-requests""#
    );
    let second = app.clone().oneshot(request("a")).await.unwrap();
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let other = app.clone().oneshot(request("b")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    drop(first);
    let third = app.clone().oneshot(request("a")).await.unwrap();
    assert_eq!(third.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_layer_from_a_file_limits_as_one_from_code() {
    let config: LimitsConfig = toml::from_str(
        r#"
        [policies.hello]
        rules = [{ name = "hello", algorithm = "fixed_window", limit = 2, period = "10s" }]

        [routes.hello]
        policy = "hello"
        key = { header = "x-client" }
        headers = ["rate_limiting", "ietf", "x_ratelimit"]
        "#,
    )
    .unwrap();
    let limits = config.build().unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(limits.layer("hello").unwrap().clone());
    for used in 1..=2 {
        let (response, _) = timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, "ratelimit-policy"), r#""hello";q=2;w=10"#);
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            (2 - used).to_string()
        );
    }
    let (refused, _) = timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let (unkeyed, _) = timed_get(&app, "/", PEER, &[]).await;
    assert_eq!(unkeyed.status(), StatusCode::BAD_REQUEST);
}

/// Each mistake and what is said about it.
#[test]
fn every_mistake_names_its_field() {
    let policies = r#"
        [policies.api]
        rules = [{ name = "api", algorithm = "gcra", limit = 10, period = "1s" }]
    "#;
    let cases = [
        (
            r#"
            [routes.api]
            policy = "nope"
            key = { global = "all" }
            "#
            .to_owned(),
            r#"`routes.api.policy`: no policy named "nope" (there are none)"#,
        ),
        (
            format!(
                r#"{policies}
                [stores.a]
                type = "memory"
                [stores.b]
                type = "memory"
                [routes.api]
                policy = "api"
                key = {{ global = "all" }}
                "#
            ),
            r#"`routes.api.store`: is required when there are several stores (there are "a", "b")"#,
        ),
        (
            format!(
                r#"{policies}
                [routes.api]
                policy = "api"
                key = {{ header = "x-api-key", global = "all" }}
                "#
            ),
            "`routes.api.key`: names several keys (header, global): set one, and `or` for a second",
        ),
        (
            format!(
                r#"{policies}
                [routes.api]
                policy = "api"
                key = {{ client_ip = {{ trusted_proxies = ["10.0.0.0/33"] }} }}
                "#
            ),
            "`routes.api.key.client_ip.trusted_proxies[0]`: \"10.0.0.0/33\" is neither an IP network (CIDR) nor an IP address",
        ),
        (
            format!(
                r#"{policies}
                [routes.api]
                policy = "api"
                key = {{ client_ip = {{ forwarded_header = "forwarded" }} }}
                "#
            ),
            "`routes.api.key.client_ip.forwarded_header`: is set without trusted_proxies",
        ),
        (
            r#"
            [policies.api]
            rules = [{ name = "api", algorithm = "fixed_window", limit = 0, period = "1s" }]
            "#
            .to_owned(),
            "`policies.api.rules[0].limit`: rule \"api\" has a limit of 0",
        ),
        (
            r#"
            [policies.api]
            rules = [{ name = "api", algorithm = "fixed_window", limit = 5, period = "1s", burst = 9 }]
            "#
            .to_owned(),
            "`policies.api.rules[0].burst`: only token_bucket and gcra rules have a burst (this is a fixed_window rule)",
        ),
        (
            r#"
            [policies.api]
            rules = [
              { name = "a", algorithm = "gcra", limit = 5, period = "1s" },
              { name = "a", algorithm = "gcra", limit = 50, period = "1min" },
            ]
            "#
            .to_owned(),
            "`policies.api.rules`: ",
        ),
        (
            r#"
            [policies.api]
            rules = []
            "#
            .to_owned(),
            "`policies.api.rules`: is empty: a policy needs at least one rule",
        ),
        (
            r#"
            [stores.shared]
            type = "redis"
            "#
            .to_owned(),
            "`stores.shared.url`: is required for a redis store",
        ),
        (
            r#"
            [stores.shared]
            type = "memory"
            url = "redis://127.0.0.1"
            "#
            .to_owned(),
            "`stores.shared.url`: is not a setting of a memory store",
        ),
        (
            r#"
            [stores.shared]
            type = "redis"
            url = "redis://127.0.0.1"
            prefix = "a{b}"
            "#
            .to_owned(),
            "`stores.shared.prefix`: invalid key prefix \"a{b}\"",
        ),
        (
            r#"
            [stores.shared]
            type = "redis"
            url = "redis://127.0.0.1"
            fallback = { instances = 0 }
            "#
            .to_owned(),
            "`stores.shared.fallback.instances`: a fallback divides quotas among at least 1 instance",
        ),
        (
            format!(
                r#"{policies}
                [routes.api]
                paths = ["api/"]
                policy = "api"
                key = {{ global = "all" }}
                "#
            ),
            r#"`routes.api.paths[0]`: "api/" is not a path: it must start with `/`"#,
        ),
        (
            format!(
                r#"{policies}
                [routes.api]
                policy = "api"
                key = {{ global = "all" }}
                deadline = "0s"
                "#
            ),
            "`routes.api.deadline`: store deadline 0ns is out of range",
        ),
        (
            format!(
                r#"{policies}
                [stores.shared]
                type = "redis"
                url = "redis://127.0.0.1"
                fallback = {{ instances = 2, timeout = "200ms" }}
                [routes.api]
                policy = "api"
                key = {{ global = "all" }}
                store = "shared"
                "#
            ),
            "`routes.api.deadline`: the store's fallback answers after 200ms, but the layer's \
             deadline is 100ms",
        ),
        (
            r#"
            [concurrency.exports]
            max_in_flight = 0
            key = { global = "all" }
            "#
            .to_owned(),
            "`concurrency.exports.max_in_flight`: a concurrency limit needs `.max_in_flight(n)`",
        ),
        (
            r#"
            [concurrency.exports]
            max_in_flight = 2
            store = "nope"
            key = { global = "all" }
            "#
            .to_owned(),
            r#"`concurrency.exports.store`: no store named "nope" (there are none)"#,
        ),
        (
            r#"
            [concurrency.exports]
            max_in_flight = 2
            key = { global = "all" }
            paths = ["/exports/"]
            [concurrency.downloads]
            max_in_flight = 2
            key = { global = "all" }
            paths = ["/exports/"]
            "#
            .to_owned(),
            r#"`concurrency.exports.paths[0]`: "/exports/" is already a path of concurrency limit "downloads""#,
        ),
        (
            r#"
            [concurrency.exports]
            max_in_flight = 2
            key = { global = "all" }
            permit_ttl = "10ms"
            "#
            .to_owned(),
            "`concurrency.exports.permit_ttl`: permit TTL 10ms is out of range: use between 100ms and ",
        ),
    ];
    for (config, expected) in cases {
        let config: LimitsConfig = toml::from_str(&config).unwrap();
        let error = config.build().unwrap_err().to_string();
        assert!(
            error.starts_with(expected),
            "expected {expected:?}\n     got {error:?}"
        );
    }
}

/// What serde finds wrong (a misspelled field, a bad duration, an unknown algorithm) is named by
/// the format's own error, with its place in the file.
#[test]
fn what_does_not_parse_is_named_by_the_format() {
    for (config, expected) in [
        (
            "[policies.api]\nrulez = []\n",
            "unknown field `rulez`, expected `rules` or `global`",
        ),
        (
            "[policies.api]\nrules = [{ name = \"a\", algorithm = \"gcra\", limit = 5, period = \"ten seconds\" }]\n",
            "invalid duration \"ten seconds\"",
        ),
        (
            "[policies.api]\nrules = [{ name = \"a\", algorithm = \"leaky\", limit = 5, period = \"1s\" }]\n",
            "unknown variant `leaky`",
        ),
        (
            "[stores.a]\ntype = \"redis\"\nurl = \"redis://x\"\nprefx = \"p\"\n",
            "unknown field `prefx`",
        ),
    ] {
        let error = toml::from_str::<LimitsConfig>(config)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{expected:?} not in {error}");
    }
}

/// A rebuild keeps the stores whose settings did not change, with their counts; a store whose
/// settings changed starts over.
#[tokio::test]
async fn a_rebuild_keeps_unchanged_stores_and_their_counts() {
    let config = |max_keys: u32, limit: u32| -> LimitsConfig {
        toml::from_str(&format!(
            r#"
            [stores.local]
            type = "memory"
            max_keys = {max_keys}

            [policies.hello]
            rules = [{{ name = "hello", algorithm = "fixed_window", limit = {limit}, period = "1min" }}]

            [routes.hello]
            policy = "hello"
            key = {{ header = "x-client" }}
            "#
        ))
        .unwrap()
    };
    let app = |limits: &tower_redis_ratelimit::config::Limits| {
        Router::new()
            .route("/", get(|| async { "hello" }))
            .layer(limits.layer("hello").unwrap().clone())
    };
    let statuses = |limits| async move {
        let app = app(&limits);
        let mut statuses = Vec::new();
        for _ in 0..3 {
            let (response, _) = timed_get(&app, "/", PEER, &[("x-client", "a")]).await;
            statuses.push(response.status().as_u16());
        }
        (statuses, limits)
    };
    let (first, limits) = statuses(config(1000, 3).build().unwrap()).await;
    assert_eq!(first, [200, 200, 200]);
    // The same store, a higher limit: the three used before still count, two more pass.
    let (kept, limits) = statuses(config(1000, 5).rebuild(&limits).unwrap()).await;
    assert_eq!(kept, [200, 200, 429]);
    // The store's settings changed: a new store, counting from zero.
    let (fresh, _) = statuses(config(2000, 5).rebuild(&limits).unwrap()).await;
    assert_eq!(fresh, [200, 200, 200]);
}

/// A program that decides itself (the gateway's Envoy service) counts in the routes' store:
/// the one named, or the default, and the same store after a rebuild that keeps it.
#[tokio::test]
async fn a_rate_store_is_the_routes_store_and_survives_a_rebuild() {
    use tower_redis_ratelimit::{Policy, Quota, Rule};

    let one: LimitsConfig = toml::from_str("[stores.local]\ntype = \"memory\"\n").unwrap();
    let limits = one.build().unwrap();
    let policy = Policy::try_from(Rule::fixed_window("own", Quota::per_minute(2))).unwrap();
    let named = limits.rate_store("envoy", Some("local")).unwrap();
    let default = limits.rate_store("envoy", None).unwrap();
    named.check(&"k".into(), &policy, 1).await.unwrap();
    // The default store is the only one: it saw the check made through its name.
    assert_eq!(
        default
            .check(&"k".into(), &policy, 0)
            .await
            .unwrap()
            .remaining(),
        1
    );
    let rebuilt = one.rebuild(&limits).unwrap();
    let kept = rebuilt.rate_store("envoy", None).unwrap();
    assert_eq!(
        kept.check(&"k".into(), &policy, 0)
            .await
            .unwrap()
            .remaining(),
        1
    );
    let err = limits.rate_store("envoy", Some("elsewhere")).err().unwrap();
    assert!(
        err.to_string().starts_with("`envoy.store`: no store named"),
        "{err}"
    );
    let two: LimitsConfig =
        toml::from_str("[stores.a]\ntype = \"memory\"\n[stores.b]\ntype = \"memory\"\n").unwrap();
    let err = two
        .build()
        .unwrap()
        .rate_store("envoy", None)
        .err()
        .unwrap();
    assert!(err.to_string().starts_with("`envoy.store`"), "{err}");
}

/// The field of a mistake that `build` reports.
pub(crate) fn field_of(config: &str) -> String {
    let config: LimitsConfig =
        toml::from_str(config).unwrap_or_else(|err| panic!("{config} does not parse: {err}"));
    match config.build() {
        Ok(_) => panic!("{config:?} built"),
        Err(tower_redis_ratelimit::ConfigError::Field { field, .. }) => field,
        Err(other) => panic!("{other} names no field"),
    }
}

/// Values out of range name their own field, not the table they are in.
#[test]
fn values_out_of_range_name_their_field() {
    let rule = |fields: &str| {
        format!("[policies.api]\nrules = [{{ name = \"api\", algorithm = \"gcra\", {fields} }}]\n")
    };
    let route = |fields: &str| {
        format!(
            "{}[routes.api]\npolicy = \"api\"\nkey = {{ global = \"all\" }}\n{fields}\n",
            rule("limit = 10, period = \"1s\"")
        )
    };
    let redis = |fields: &str| {
        format!("[stores.shared]\ntype = \"redis\"\nurl = \"redis://127.0.0.1\"\n{fields}\n")
    };
    let cases = [
        (rule("limit = 0, period = \"1s\""), "policies.api.rules[0].limit"),
        (rule("limit = 5, period = \"0s\""), "policies.api.rules[0].period"),
        (rule("limit = 5, period = \"20years\""), "policies.api.rules[0].period"),
        (rule("limit = 5, period = \"1s\", burst = 0"), "policies.api.rules[0].burst"),
        (
            "[policies.api]\nrules = [{ name = \"no spaces\", algorithm = \"gcra\", limit = 5, period = \"1s\" }]\n"
                .to_owned(),
            "policies.api.rules[0].name",
        ),
        (
            "[policies.api]\nrules = [{ name = \"log\", algorithm = \"sliding_log\", limit = 20000, period = \"1s\" }]\n"
                .to_owned(),
            "policies.api.rules[0].limit",
        ),
        (
            "[policies.api]\nrules = [{ name = \"w\", algorithm = \"sliding_window\", limit = 5, period = \"1s\", sub_intervals = 0 }]\n"
                .to_owned(),
            "policies.api.rules[0].sub_intervals",
        ),
        (route("deadline = \"0ms\""), "routes.api.deadline"),
        (
            route("deny = { networks = [\"10.0.0.0/8\", \"10.0.0.0/33\"] }"),
            "routes.api.deny.networks[1]",
        ),
        (
            route("allow = { networks = [\"not a network\"] }"),
            "routes.api.allow.networks[0]",
        ),
        (
            route("key = { client_ip = { trusted_proxies = [\"10.0.0.0/33\"] } }")
                .replace("key = { global = \"all\" }\n", ""),
            "routes.api.key.client_ip.trusted_proxies[0]",
        ),
        (
            route("key = { header = \"bad header\" }").replace("key = { global = \"all\" }\n", ""),
            "routes.api.key.header",
        ),
        (
            "[concurrency.reports]\nmax_in_flight = 2\nkey = { global = \"all\" }\npermit_ttl = \"10ms\"\n"
                .to_owned(),
            "concurrency.reports.permit_ttl",
        ),
        (
            "[concurrency.reports]\nmax_in_flight = 2\nkey = { global = \"all\" }\ndeadline = \"2min\"\n"
                .to_owned(),
            "concurrency.reports.deadline",
        ),
        (redis("quota_leases = { max_share = 2.0 }"), "stores.shared.quota_leases.max_share"),
        (redis("quota_leases = { lifetime = \"2min\" }"), "stores.shared.quota_leases.lifetime"),
        (redis("quota_leases = { max_keys = 0 }"), "stores.shared.quota_leases.max_keys"),
        (redis("fallback = { instances = 0 }"), "stores.shared.fallback.instances"),
        (redis("fallback = { instances = 2, cool_down = \"0s\" }"), "stores.shared.fallback.cool_down"),
        (redis("prefix = \"a{b}\""), "stores.shared.prefix"),
        (redis("connect_timeout = \"0s\""), "stores.shared.connect_timeout"),
        (
            "[stores.shared]\ntype = \"redis\"\nurl = \"http://127.0.0.1\"\n".to_owned(),
            "stores.shared.url",
        ),
    ];
    let mut wrong = Vec::new();
    for (config, expected) in &cases {
        let field = field_of(config);
        if field != *expected {
            wrong.push(format!("expected `{expected}`, got `{field}`"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn example_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

/// A file of `text` named `name` in a directory of its own, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "tower-redis-ratelimit-config-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[test]
fn from_file_reads_each_format_by_its_extension() {
    use tower_redis_ratelimit::config::Format;
    let toml = LimitsConfig::from_file(example_path("limits.toml")).unwrap();
    let yaml = LimitsConfig::from_file(example_path("limits.yaml")).unwrap();
    let json = LimitsConfig::from_file(example_path("limits.json")).unwrap();
    assert_eq!(toml, yaml);
    assert_eq!(toml, json);
    assert_eq!(
        toml,
        toml::from_str::<LimitsConfig>(&example("limits.toml")).unwrap()
    );
    let yml = TempFile::new("limits.YML", &example("limits.yaml"));
    assert_eq!(LimitsConfig::from_file(&yml.0).unwrap(), yaml);
    assert_eq!(Format::from_path("a/limits.yml"), Some(Format::Yaml));
    assert_eq!(Format::from_path("limits.ini"), None);
    assert_eq!(Format::from_path("limits"), None);
}

#[test]
fn a_missing_file_and_an_unknown_extension_are_named() {
    use tower_redis_ratelimit::config::LoadError;
    let missing = example_path("no-such-limits.toml");
    let error = LimitsConfig::from_file(&missing).unwrap_err();
    assert!(
        matches!(&error, LoadError::Read { path, source }
            if *path == missing && source.kind() == std::io::ErrorKind::NotFound),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())),
        "{error}"
    );
    let ini = TempFile::new("limits.ini", "[policies]\n");
    let error = LimitsConfig::from_file(&ini.0).unwrap_err();
    assert!(matches!(&error, LoadError::UnknownFormat { path } if *path == ini.0));
    assert_eq!(
        format!("{error:?}"),
        format!(
            "{}: unknown configuration format: name the file *.toml, *.yaml, *.yml or *.json, or \
             read it with `LimitsConfig::parse` and its format",
            ini.0.display()
        )
    );
}

/// Syntax and shape mistakes carry the file, the line and the column, in every format.
#[test]
fn what_does_not_parse_is_named_with_its_file_line_and_column() {
    use tower_redis_ratelimit::config::LoadError;
    let cases = [
        (
            "limits.toml",
            "[policies.api]\nrules = [\n  { name = \"a\", algorithm = \"gcra\", limit = 5, period = \"1s\" },\n  { name = \"b\" algorithm = \"gcra\" },\n]\n",
            (4, 16),
            "missing comma between key-value pairs, expected `,`",
        ),
        (
            "limits.toml",
            "[policies.api]\nrulez = []\n",
            (2, 1),
            "unknown field `rulez`, expected `rules` or `global`",
        ),
        (
            "limits.yaml",
            "policies:\n  api:\n    rules:\n      - name: a\n        algorithm: leaky\n",
            (5, 20),
            "policies.api.rules[0].algorithm: unknown variant `leaky`",
        ),
        (
            "limits.yml",
            "policies:\n  api:\n    rules: [\n",
            (4, 1),
            "did not find expected",
        ),
        (
            "limits.json",
            "{\n  \"policies\": {\n    \"api\": { \"rules\": [ }\n  }\n}\n",
            (3, 25),
            "expected value",
        ),
        (
            "limits.json",
            "{ \"routes\": { \"api\": { \"policy\": \"api\", \"key\": { \"global\": \"a\" },\n  \"deadline\": \"soon\" } } }\n",
            (2, 20),
            "invalid duration \"soon\"",
        ),
    ];
    for (name, text, (line, column), expected) in cases {
        let file = TempFile::new(name, text);
        let error = LimitsConfig::from_file(&file.0).unwrap_err();
        let LoadError::Parse {
            path, line_column, ..
        } = &error
        else {
            panic!("{name}: {error}");
        };
        assert_eq!(path.as_deref(), Some(file.0.as_path()));
        assert_eq!(*line_column, Some((line, column)), "{name}: {error}");
        let shown = error.to_string();
        let place = format!("{}:{line}:{column}: ", file.0.display());
        assert!(
            shown.starts_with(&place) && shown.contains(expected),
            "{name}: expected {place}…{expected}…, got {shown}"
        );
    }
}
