use std::path::PathBuf;

use deadpool_redis::{Config, ConnectionAddr, ProtocolVersion, RedisConnectionInfo};

use super::*;
use redis::IntoConnectionInfo;

use crate::key::Key;
use crate::store::redis::connect::{describe, pool, redact_url, refusal};
use crate::{Policy, Quota, Rule};

fn from_json(json: &str) -> Config {
    serde_json::from_str(json).unwrap_or_else(|err| panic!("{json} does not parse: {err}"))
}

fn connection(addr: ConnectionAddr, redis: RedisConnectionInfo) -> Config {
    Config::from_connection_info(ConnectionInfo { addr, redis })
}

fn credentials(db: i64, username: Option<&str>, password: Option<&str>) -> RedisConnectionInfo {
    RedisConnectionInfo {
        db,
        username: username.map(str::to_owned),
        password: password.map(str::to_owned),
        protocol: ProtocolVersion::RESP2,
    }
}

fn error_of(result: Result<RedisStore, ConfigError>) -> String {
    match result {
        Ok(store) => panic!("expected a configuration error, built {store:?}"),
        Err(ConfigError::Store(error)) => error.to_string(),
        Err(other) => panic!("expected ConfigError::Store, got {other:?}"),
    }
}

#[test]
fn bad_urls_and_prefixes_are_configuration_errors() {
    assert!(matches!(
        RedisStore::open("http://localhost"),
        Err(ConfigError::Store(_))
    ));
    assert!(matches!(
        RedisStore::builder("redis://localhost")
            .prefix("a{b}")
            .build(),
        Err(ConfigError::Store(_))
    ));
    assert!(matches!(
        RedisStore::builder("redis://localhost").prefix("").build(),
        Err(ConfigError::Store(_))
    ));
    assert!(RedisStore::open("redis://127.0.0.1:6379/2").is_ok());
}

#[test]
fn zero_timeouts_and_hour_long_backoffs_are_configuration_errors() {
    let url = "redis://127.0.0.1:6379";
    let message = error_of(
        RedisStore::builder(url)
            .connect_timeout(Duration::ZERO)
            .build(),
    );
    assert!(message.contains("connect timeout"), "{message}");
    let message = error_of(RedisStore::builder(url).stale_after(Duration::ZERO).build());
    assert!(message.contains("stale_after"), "{message}");
    let message = error_of(
        RedisStore::builder(url)
            .reconnect_backoff(Duration::from_secs(1), Duration::MAX)
            .build(),
    );
    assert!(message.contains("backoff"), "{message}");
    assert!(
        RedisStore::builder(url)
            .reconnect_backoff(Duration::ZERO, MAX_BACKOFF)
            .build()
            .is_ok()
    );
}

#[test]
fn passwords_never_reach_logs() {
    assert_eq!(
        redact_url("redis://user:secret@host:6379"),
        "redis://user:***@host:6379"
    );
    assert_eq!(redact_url("redis://:secret@host"), "redis://:***@host");
    assert_eq!(redact_url("redis://host"), "redis://host");
    assert_eq!(redact_url("user:secret@host"), "user:***@host");
    assert_eq!(
        redact_url("redis+unix:///run/redis.sock?db=1&user=app&pass=secret"),
        "redis+unix:///run/redis.sock?db=1&user=app&pass=***"
    );
    assert_eq!(
        redact_url("rediss://app:secret@host/0?protocol=resp3#insecure"),
        "rediss://app:***@host/0?protocol=resp3#insecure"
    );
    for url in ["http://user:secret@host", "redis://user:secret@host/x"] {
        let error = RedisStore::open(url).unwrap_err().to_string();
        assert!(!error.contains("secret"), "{error}");
        assert!(error.contains("user:***@host"), "{error}");
    }
}

#[test]
fn a_config_with_a_url_builds_the_store_the_url_would() {
    let config =
        from_json(r#"{"url": "redis://app:s3cret@10.0.0.5:6380/3", "pool": {"max_size": 64}}"#);
    let store = RedisStoreBuilder::from_config(config)
        .prefix("app")
        .build()
        .unwrap();
    assert_eq!(store.redacted_url(), "redis://app:***@10.0.0.5:6380/3");
    assert!(!format!("{store:?}").contains("s3cret"));
    // The builder's own settings still apply.
    let policy = Policy::new([Rule::gcra("second", Quota::per_second(10))]).unwrap();
    assert_eq!(
        store.state_keys(&Key::from("c"), &policy),
        ["app:second:gcra-10/1s:{c}"]
    );
}

#[test]
fn connection_settings_are_shown_as_a_url_without_the_password() {
    let cases = [
        (
            ConnectionAddr::Tcp("10.0.0.5".into(), 6380),
            credentials(3, Some("app"), Some("s3cret")),
            "redis://app:***@10.0.0.5:6380/3",
        ),
        (
            ConnectionAddr::Tcp("redis.internal".into(), 6379),
            credentials(0, None, Some("s3cret")),
            "redis://:***@redis.internal:6379/0",
        ),
        (
            ConnectionAddr::Tcp("::1".into(), 6379),
            credentials(1, Some("app"), None),
            "redis://app@[::1]:6379/1",
        ),
        (
            ConnectionAddr::Unix(PathBuf::from("/run/redis/redis.sock")),
            credentials(2, Some("app"), Some("s3cret")),
            "redis+unix:///run/redis/redis.sock?db=2&user=app&pass=***",
        ),
    ];
    for (addr, redis, shown) in cases {
        let store = RedisStore::from_config(connection(addr, redis)).unwrap();
        assert_eq!(store.redacted_url(), shown);
        assert!(!format!("{store:?}").contains("s3cret"));
    }
    let tls = ConnectionInfo {
        addr: ConnectionAddr::TcpTls {
            host: "redis.internal".into(),
            port: 6380,
            insecure: true,
        },
        redis: RedisConnectionInfo {
            protocol: ProtocolVersion::RESP3,
            ..credentials(0, Some("app"), Some("s3cret"))
        },
    };
    assert_eq!(
        describe(&tls),
        "rediss://app:***@redis.internal:6380/0?protocol=resp3#insecure"
    );
}

#[test]
fn an_address_this_build_cannot_reach_is_a_configuration_error() {
    let tls = ConnectionAddr::TcpTls {
        host: "redis.internal".into(),
        port: 6380,
        insecure: false,
    };
    let supported = redis::ConnectionAddr::from(tls.clone()).is_supported();
    let result = RedisStore::from_config(connection(tls, credentials(0, None, Some("s3cret"))));
    if supported {
        assert!(result.is_ok());
    } else {
        let message = error_of(result);
        assert!(message.contains("TLS"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
    let message = error_of(RedisStore::from_config(connection(
        ConnectionAddr::Tcp(String::new(), 6379),
        credentials(0, None, None),
    )));
    assert!(message.contains("no host"), "{message}");
}

#[test]
fn a_rediss_url_without_the_tls_feature_names_the_feature() {
    let url = "rediss://app:s3cret@redis.internal:6380";
    assert_eq!(
        refusal(url, "url", "the feature is not enabled".into(), false).to_string(),
        "invalid store configuration: cannot connect to rediss://app:***@redis.internal:6380: \
         TLS to Redis (rediss://) needs the `tls` feature of tower-redis-ratelimit"
    );
    // Built with it, a URL that does not parse is told as redis-rs says.
    assert_eq!(
        refusal(url, "url", "bad".into(), true).to_string(),
        "invalid store configuration: invalid Redis URL rediss://app:***@redis.internal:6380: \
         bad (write redis://[user:password@]host[:port][/db])"
    );
}

#[test]
fn a_deadpool_tls_address_is_verified_never_insecure() {
    let tls = |insecure| ConnectionAddr::TcpTls {
        host: "redis.internal".into(),
        port: 6380,
        insecure,
    };
    let store = RedisStore::from_config(connection(tls(false), credentials(0, None, None)));
    assert_eq!(
        store.unwrap().redacted_url(),
        "rediss://redis.internal:6380/0"
    );
    let message = error_of(RedisStore::from_config(connection(
        tls(true),
        credentials(0, None, None),
    )));
    assert!(
        message.contains("rediss://redis.internal:6380/0#insecure asks for TLS without verifying"),
        "{message}"
    );
}

#[test]
fn a_config_with_neither_url_nor_connection_means_the_local_default() {
    let config = Config {
        url: None,
        connection: None,
        pool: None,
    };
    let store = RedisStore::from_config(config).unwrap();
    assert_eq!(store.redacted_url(), "redis://127.0.0.1:6379/0");
    let store = RedisStore::from_config(Config::default()).unwrap();
    assert_eq!(store.redacted_url(), "redis://127.0.0.1:6379/0");
}

#[test]
fn invalid_configs_are_clear_configuration_errors() {
    let both = from_json(
        r#"{"url": "redis://:s3cret@127.0.0.1",
            "connection": {"addr": {"Tcp": ["127.0.0.1", 6379]}, "db": 0,
                           "password": "s3cret", "protocol": "RESP2"}}"#,
    );
    let message = error_of(RedisStore::from_config(both));
    assert!(message.contains("both `url` and `connection`"), "{message}");

    let bad_url = Config::from_url("redis://app:s3cret@/2");
    let message = error_of(RedisStore::from_config(bad_url));
    assert!(
        message.starts_with("invalid Redis URL redis://app:***@/2"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");

    let zero_create =
        from_json(r#"{"pool": {"max_size": 1, "timeouts": {"create": {"secs": 0, "nanos": 0}}}}"#);
    let message = error_of(RedisStore::from_config(zero_create));
    assert!(message.contains("create timeout"), "{message}");
}

#[test]
fn the_create_timeout_is_the_connect_timeout_and_other_pool_settings_do_not_apply() {
    let config = from_json(
        r#"{"url": "redis://127.0.0.1:6379",
            "pool": {"max_size": 1, "queue_mode": "Lifo",
                     "timeouts": {"create": {"secs": 3, "nanos": 0},
                                  "wait": {"secs": 0, "nanos": 1000},
                                  "recycle": {"secs": 9, "nanos": 0}}}}"#,
    );
    let builder = RedisStoreBuilder::from_config(config.clone());
    assert_eq!(builder.connect_timeout, Duration::from_secs(3));
    // A setting made after `from_config` wins.
    let builder =
        RedisStoreBuilder::from_config(config).connect_timeout(Duration::from_millis(200));
    assert_eq!(builder.connect_timeout, Duration::from_millis(200));

    // No create timeout: the store's own default bound, never an unbounded connect.
    let config = from_json(
        r#"{"url": "redis://127.0.0.1:6379",
            "pool": {"max_size": 8, "timeouts": {"wait": {"secs": 5, "nanos": 0}}}}"#,
    );
    assert_eq!(
        RedisStoreBuilder::from_config(config).connect_timeout,
        Duration::from_secs(1)
    );

    // The pool the store makes its connections with: bounded by the connect timeout, whatever
    // the config's wait or size.
    let info = "redis://127.0.0.1:6379".into_connection_info().unwrap();
    let pool = pool(info, Duration::from_millis(700)).unwrap();
    assert_eq!(pool.timeouts().create, Some(Duration::from_millis(700)));
    assert_eq!(pool.status().max_size, 2);
}

/// The way deadpool-redis documents its configuration: environment variables read by the
/// `config` crate (here from a map, so the test does not depend on the process's environment).
#[test]
fn a_config_read_from_environment_variables_builds_a_store() {
    #[derive(serde::Deserialize)]
    struct Settings {
        redis: Config,
    }
    let variables = [
        ("REDIS__URL", "redis://app:s3cret@redis.internal:6379/2"),
        ("REDIS__POOL__MAX_SIZE", "16"),
        ("REDIS__POOL__TIMEOUTS__CREATE__SECS", "2"),
        ("REDIS__POOL__TIMEOUTS__CREATE__NANOS", "0"),
    ];
    let environment = config::Environment::default().separator("__").source(Some(
        variables
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect(),
    ));
    let settings: Settings = config::Config::builder()
        .add_source(environment)
        .build()
        .unwrap()
        .try_deserialize()
        .unwrap();
    let builder = RedisStoreBuilder::from_config(settings.redis);
    assert_eq!(builder.connect_timeout, Duration::from_secs(2));
    let store = builder.prefix("checkout").build().unwrap();
    assert_eq!(
        store.redacted_url(),
        "redis://app:***@redis.internal:6379/2"
    );
}
