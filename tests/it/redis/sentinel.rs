//! The Redis store on Redis Sentinel (a primary, its replica and three sentinels, started by the
//! test): it finds the primary through the sentinels, and follows it across a failover asked
//! with `SENTINEL FAILOVER` and across the primary's death, with no restart; and with the
//! servers' password apart from the sentinels', as envoyproxy/ratelimit's `REDIS_AUTH` and
//! `REDIS_SENTINEL_AUTH` set them.

use std::time::Duration;

use tower_redis_ratelimit::config::{Format, LimitsConfig};
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::RedisAuth;
use tower_redis_ratelimit::{Decision, Policy, Quota, RedisStore, Rule, Store};

use crate::support::sentinel::{MASTER, Passwords, RedisSentinels};

fn policy() -> Policy {
    Policy::try_from(Rule::fixed_window("api", Quota::per_hour(1_000))).unwrap()
}

async fn check(store: &RedisStore, key: &str) -> Option<Decision> {
    store.check(&Key::from(key), &policy(), 1).await.ok()
}

/// Waits until `key` is counted again, on whichever server is primary now, and returns the count
/// it reports.
async fn counted_again(store: &RedisStore, key: &str) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(decision) = check(store, key).await.filter(Decision::is_allowed) {
            return decision.used();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no decision from the new primary within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_the_primary_across_a_failover_and_a_killed_primary() {
    let mut sentinels = RedisSentinels::start();
    let urls = sentinels.urls();
    let store = RedisStore::sentinel(&urls, MASTER)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
        .build()
        .unwrap();
    assert!(
        store
            .redacted_url()
            .starts_with("Redis Sentinel redis://127.0.0.1:")
    );
    for n in 1..=3 {
        assert_eq!(check(&store, "client").await.unwrap().used(), n);
    }
    let first = sentinels.primary_port();

    // A failover asked of the sentinels: once the old primary is a replica it refuses writes
    // (READONLY); the store asks the sentinels again and counts on the new one. The counts
    // carried over by replication are kept.
    sentinels.failover();
    assert_ne!(sentinels.primary_port(), first);
    let used = counted_again(&store, "client").await;
    assert!(
        used >= 4,
        "the count went on from the replicated state: {used}"
    );
    let key = "ratelimit:api:fw-1h:{client}";
    assert_eq!(
        sentinels.primary().cli(&["HGET", key, "n"]),
        used.to_string(),
        "counted on the new primary"
    );

    // The primary dies: the sentinels promote the replica, and the store follows.
    let second = sentinels.primary_port();
    sentinels.kill_primary();
    assert_ne!(sentinels.primary_port(), second);
    let after = counted_again(&store, "other-client").await;
    assert_eq!(after, 1);
    assert_eq!(
        sentinels
            .primary()
            .cli(&["HGET", "ratelimit:api:fw-1h:{other-client}", "n"]),
        "1"
    );
}

#[test]
fn sentinel_settings_are_checked_when_the_store_is_built() {
    let error = RedisStore::sentinel(Vec::<String>::new(), MASTER)
        .build()
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("Redis Sentinel needs at least one URL"),
        "{error}"
    );
    let error = RedisStore::sentinel(["redis://127.0.0.1:26379"], "")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("name of the primary"), "{error}");
    let error = RedisStore::sentinel(["http://nope"], MASTER)
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("invalid Redis Sentinel URL"),
        "{error}"
    );
}

/// Counts `key` three times in `store` (a store that cannot reach the primary fails the test).
async fn counts(store: &dyn Store, key: &str) {
    for n in 1..=3 {
        let decision = store.check(&Key::from(key), &policy(), 1).await;
        let used = decision
            .unwrap_or_else(|err| panic!("count {n}: {err}"))
            .used();
        assert_eq!(used, n);
    }
}

/// The store in the `[stores.ha]` table of a configuration file: the sentinels' `urls` and the
/// `primary_auth` table's TOML.
fn from_file(urls: &[String], primary_auth: &str) -> std::sync::Arc<dyn Store> {
    let sentinels: Vec<String> = urls.iter().map(|url| format!("{url:?}")).collect();
    let file = format!(
        "[stores.ha]\ntype = \"sentinel\"\nsentinels = [{}]\nmaster = \"{MASTER}\"\n\
         primary_auth = {primary_auth}\n",
        sentinels.join(", ")
    );
    let config = LimitsConfig::parse(&file, Format::Toml).unwrap_or_else(|err| panic!("{err}"));
    let limits = config.build().unwrap_or_else(|err| panic!("{err}"));
    limits.rate_store("stores", Some("ha")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_on_the_servers_and_none_on_the_sentinels() {
    // envoyproxy/ratelimit's usual set-up: `REDIS_AUTH` alone.
    let sentinels = RedisSentinels::start_with(&Passwords {
        servers: Some("servers-secret".to_owned()),
        sentinels: None,
    });
    let urls = sentinels.urls();
    let store = RedisStore::sentinel(&urls, MASTER)
        .primary_auth(RedisAuth::password("servers-secret"))
        .build()
        .unwrap();
    counts(&store, "store").await;
    counts(
        &*from_file(&urls, r#"{ password = "servers-secret" }"#),
        "file",
    )
    .await;
    // Without it, the primary refuses (NOAUTH): the setting is what made the counts. The one
    // other way, the servers' password in the sentinels' URLs, the sentinels refuse.
    let without = RedisStore::sentinel(&urls, MASTER).build().unwrap();
    assert!(check(&without, "store").await.is_none());
    let in_urls: Vec<String> = urls
        .iter()
        .map(|url| url.replace("redis://", "redis://:servers-secret@"))
        .collect();
    let in_urls = RedisStore::sentinel(&in_urls, MASTER).build().unwrap();
    assert!(check(&in_urls, "store").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_on_the_sentinels_and_another_or_none_on_the_servers() {
    // `REDIS_SENTINEL_AUTH` with `REDIS_AUTH` different, then without it.
    let both = RedisSentinels::start_with(&Passwords {
        servers: Some("servers-secret".to_owned()),
        sentinels: Some("sentinels-secret".to_owned()),
    });
    assert!(both.urls()[0].starts_with("redis://:sentinels-secret@"));
    let store = RedisStore::sentinel(both.urls(), MASTER)
        .primary_auth(RedisAuth::password("servers-secret"))
        .build()
        .unwrap();
    counts(&store, "store").await;
    let file = from_file(&both.urls(), r#"{ password = "servers-secret" }"#);
    counts(&*file, "file").await;
    drop(both);

    let sentinels_only = RedisSentinels::start_with(&Passwords {
        servers: None,
        sentinels: Some("sentinels-secret".to_owned()),
    });
    let urls = sentinels_only.urls();
    let store = RedisStore::sentinel(&urls, MASTER)
        .primary_auth(RedisAuth::none())
        .build()
        .unwrap();
    counts(&store, "store").await;
    counts(&*from_file(&urls, "{}"), "file").await;
    // The sentinels' password sent to the servers, which have none, is refused.
    let without = RedisStore::sentinel(&urls, MASTER).build().unwrap();
    assert!(check(&without, "store").await.is_none());
}

#[test]
fn primary_auth_is_a_sentinel_setting() {
    let error = RedisStore::builder("redis://127.0.0.1:6379")
        .primary_auth(RedisAuth::password("secret"))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("`primary_auth`"), "{error}");
    let file = "[stores.one]\ntype = \"redis\"\nurl = \"redis://127.0.0.1\"\n\
                primary_auth = { password = \"secret\" }\n";
    let error = LimitsConfig::parse(file, Format::Toml)
        .map_err(|err| err.to_string())
        .and_then(|config| config.build().map(drop).map_err(|err| err.to_string()))
        .unwrap_err();
    assert!(error.contains("stores.one.primary_auth"), "{error}");
    // A password is never shown.
    let shown = format!("{:?}", RedisAuth::user("app", "secret"));
    assert!(
        !shown.contains("secret") && shown.contains("app"),
        "{shown}"
    );
}
