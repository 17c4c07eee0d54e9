//! A global policy and a region's store from a configuration file: the same types as in code,
//! spending allotments of a real ledger; and each mistake named by its field.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::RedisStore;
use tower_redis_ratelimit::config::LimitsConfig;
use tower_redis_ratelimit::store::region::Ledger;

use crate::config::field_of;
use crate::support::{RedisServer, get as send};

fn config(region: &RedisServer, ledger: &RedisServer) -> String {
    format!(
        r#"
        [stores.eu]
        type = "redis"
        url = "{}"
        region = {{ name = "eu-west", ledger = {{ url = "{}" }}, max_skew = "2ms", sync_every = "20ms", partition = {{ emergency = {{ fraction = 0.1 }} }} }}

        [policies.api]
        global = true
        rules = [{{ name = "api", algorithm = "fixed_window", limit = 20, period = "1s" }}]

        [routes.api]
        policy = "api"
        key = {{ header = "x-client" }}
        "#,
        region.url(),
        ledger.url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_store_and_a_global_policy_from_a_file_spend_the_ledger_s_allotments() {
    let (region, ledger) = (RedisServer::start(), RedisServer::start());
    Ledger::new(RedisStore::open(&ledger.url()).unwrap())
        .declare_new(Duration::from_millis(2))
        .await
        .unwrap();
    let config: LimitsConfig = toml::from_str(&config(&region, &ledger)).unwrap();
    let limits = config.build().unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(limits.layer("api").unwrap().clone());
    // The declared ledger grants from the window after next; asked throughout, the region takes
    // allotments as its demand shows and admits at most the quota of a window.
    let mut admitted = std::collections::BTreeMap::<u64, u32>::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(3_500) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let response = send(&app, "/", "192.0.2.1:4000", &[("x-client", "a")]).await;
        if response.status() == StatusCode::OK {
            *admitted.entry(at).or_default() += 1;
        } else {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(admitted.values().all(|&count| count <= 20), "{admitted:?}");
    // Decided as a global policy: from the region's allotments, not by the plain store.
    assert!(
        region.keys().iter().any(|key| key.contains(":region:api:")),
        "{:?}",
        region.keys()
    );
    assert!(admitted.values().any(|&count| count >= 15), "{admitted:?}");
}

#[test]
fn mistakes_of_global_policies_and_regions_name_their_field() {
    let policy = |rules: &str| {
        format!(
            "[policies.api]\nglobal = true\nrules = [{rules}]\n[routes.api]\npolicy = \"api\"\nkey = {{ global = \"all\" }}\n"
        )
    };
    let window = r#"{ name = "a", algorithm = "fixed_window", limit = 5, period = "1s" }"#;
    let bucket = r#"{ name = "b", algorithm = "gcra", limit = 5, period = "1s" }"#;
    assert_eq!(
        field_of(&policy(&format!("{window}, {bucket}"))),
        "policies.api.rules"
    );
    // A sliding log cannot be allotted to regions; a global rule does not delay.
    let log = r#"{ name = "b", algorithm = "sliding_log", limit = 5, period = "1s" }"#;
    assert_eq!(field_of(&policy(log)), "policies.api.rules[0]");
    let store = |region: &str| {
        format!(
            "[stores.eu]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:1\"\nregion = {region}\n{}",
            policy(window)
        )
    };
    let ledger = r#"{ url = "redis://127.0.0.1:2" }"#;
    assert_eq!(
        field_of(&store(&format!(
            r#"{{ name = "eu west", ledger = {ledger} }}"#
        ))),
        "stores.eu.region.name"
    );
    assert_eq!(
        field_of(&store(&format!(
            r#"{{ name = "eu", ledger = {ledger}, partition = {{ emergency = {{ fraction = 1.5 }} }} }}"#
        ))),
        "stores.eu.region.partition"
    );
    assert_eq!(
        field_of(&store(r#"{ name = "eu", ledger = { master = "ledger" } }"#)),
        "stores.eu.region.ledger"
    );
    // A Cluster's nodes, or one server: not both.
    assert_eq!(
        field_of(&store(
            r#"{ name = "eu", ledger = { url = "redis://127.0.0.1:2", nodes = ["redis://127.0.0.1:3"] } }"#
        )),
        "stores.eu.region.ledger"
    );
    let memory = format!(
        "[stores.eu]\ntype = \"memory\"\nregion = {{ name = \"eu\", ledger = {ledger} }}\n{}",
        policy(window)
    );
    assert_eq!(field_of(&memory), "stores.eu.region");
    // A global policy fails closed: a route that says it fails open is a mistake.
    let open = format!("{}failure_mode = \"open\"\n", policy(window));
    assert_eq!(field_of(&open), "routes.api.failure_mode");
}

/// A global policy's rule may be a fixed window, a sliding window, GCRA or a token bucket.
#[test]
fn global_rate_and_sliding_rules_from_a_file_build() {
    for rule in [
        r#"{ name = "a", algorithm = "gcra", limit = 600, period = "1min", burst = 20 }"#,
        r#"{ name = "a", algorithm = "token_bucket", limit = 600, period = "1min", burst = 20 }"#,
        r#"{ name = "a", algorithm = "sliding_window", limit = 600, period = "1min", sub_intervals = 12 }"#,
    ] {
        let file = format!(
            "[policies.api]\nglobal = true\nrules = [{rule}]\n[routes.api]\npolicy = \"api\"\nkey = {{ global = \"all\" }}\n"
        );
        let config: LimitsConfig = toml::from_str(&file).unwrap();
        let limits = config
            .build()
            .unwrap_or_else(|error| panic!("{rule}: {error}"));
        assert!(limits.layer("api").unwrap().policy().is_global(), "{rule}");
    }
}

/// A layer built in code from a global policy is global; one given another rule besides is a
/// mistake, not a silently local policy.
#[test]
fn a_layer_keeps_its_policy_global() {
    use tower_redis_ratelimit::key::GlobalKey;
    use tower_redis_ratelimit::{ConfigError, Policy, Quota, RateLimitLayer, Rule};

    let policy = Policy::global(Rule::fixed_window("api", Quota::per_second(5))).unwrap();
    let layer = RateLimitLayer::builder()
        .key(GlobalKey::new("all"))
        .policy(&policy)
        .build()
        .unwrap();
    assert!(layer.policy().is_global());
    let error = RateLimitLayer::builder()
        .key(GlobalKey::new("all"))
        .policy(&policy)
        .rule(Rule::gcra("burst", Quota::per_second(1)))
        .build()
        .unwrap_err();
    assert_eq!(error, ConfigError::GlobalRules { count: 2 });
}
