//! The names of the keys in Redis: `<prefix>:<rule>:<code>:{<client>}`, where the code names the
//! algorithm and the time base of its state (`fw-1h`, `gcra-1/1d`, ...), the hash tag is the client
//! key itself (so all rules of one client share a cluster slot, and clients spread over the
//! cluster), and a client key that is long, binary, or could break the tag is stored as `#` and 32
//! hex digits of its SHA-256.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::{RedisServer, get as send, header};
use axum::Router;
use axum::routing::get;
use http::StatusCode;
use http::request::Parts;
use sha2::{Digest, Sha256};
use tower_redis_ratelimit::key::{Key, KeyError};
use tower_redis_ratelimit::{Quota, RateLimitLayer, RedisStore, Rule};

const PEER: &str = "192.0.2.33:7000";

/// The client key is the hex-decoded `x-key-hex` header: any bytes at all.
fn hex_key(parts: &Parts) -> Result<Key, KeyError> {
    let hex = parts
        .headers
        .get("x-key-hex")
        .ok_or_else(|| KeyError::missing("no x-key-hex header"))?
        .as_bytes();
    let digit = |c: u8| char::from(c).to_digit(16).expect("hex digit") as u8;
    Ok(Key::from(
        hex.chunks(2)
            .map(|pair| digit(pair[0]) << 4 | digit(pair[1]))
            .collect::<Vec<u8>>(),
    ))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A two-rule policy (one of each algorithm) with a quota of one request, on a store with
/// `prefix`.
fn app(redis: &RedisServer, prefix: &str) -> Router {
    let store = RedisStore::builder(&redis.url())
        .prefix(prefix)
        .build()
        .unwrap();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("per-hour", Quota::per_hour(1)))
        .rule(Rule::gcra("per-day", Quota::per_day(1)))
        .key(hex_key)
        .store(store)
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

/// Sends a request keyed by `key` and returns its status and `Rate-Limiting-State`.
async fn request(app: &Router, key: &[u8]) -> (StatusCode, String) {
    let response = send(app, "/", PEER, &[("x-key-hex", &to_hex(key))]).await;
    (response.status(), header(&response, "rate-limiting-state"))
}

/// What a client key is stored as: `#` and the first 16 bytes of its SHA-256 in lowercase hex.
fn digest(key: &[u8]) -> String {
    format!("#{}", to_hex(&Sha256::digest(key)[..16]))
}

/// The Redis keys of one client under `prefix`.
fn keys_of(prefix: &str, stored_client: &str) -> BTreeSet<String> {
    BTreeSet::from([
        format!("{prefix}:per-hour:fw-1h:{{{stored_client}}}"),
        format!("{prefix}:per-day:gcra-1/1d:{{{stored_client}}}"),
    ])
}

/// The hash tag of a key, as Redis Cluster reads it: between the first `{` and the next `}`.
fn hash_tag(key: &str) -> &str {
    let open = key.find('{').expect("a hash tag") + 1;
    let close = open + key[open..].find('}').expect("a closed hash tag");
    &key[open..close]
}

/// Sends `key` twice and checks its state is in exactly the keys of `stored` (and nowhere else):
/// the first request is counted there, the second is refused by it.
async fn assert_stored_as(redis: &RedisServer, app: &Router, key: &[u8], stored: &str) {
    let before: BTreeSet<String> = redis.keys().into_iter().collect();
    assert_eq!(request(app, key).await, (StatusCode::OK, "Allow".into()));
    assert_eq!(
        request(app, key).await,
        (StatusCode::TOO_MANY_REQUESTS, "Deny".into()),
        "the same key is counted in the same place"
    );
    let after: BTreeSet<String> = redis.keys().into_iter().collect();
    let new: BTreeSet<String> = after.difference(&before).cloned().collect();
    assert_eq!(
        new,
        keys_of("ratelimit", stored),
        "{:?}",
        String::from_utf8_lossy(key)
    );
    for redis_key in &new {
        assert_eq!(hash_tag(redis_key), stored, "{redis_key}");
        assert!(redis_key.ends_with('}'), "{redis_key}");
        assert!(redis.pttl(redis_key) > 0, "{redis_key}");
    }
}

/// A short printable key is kept as it is, as the hash tag of every rule's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_printable_keys_are_the_hash_tag_verbatim() {
    let redis = RedisServer::start();
    let app = app(&redis, "ratelimit");
    assert_stored_as(&redis, &app, b"alice", "alice").await;
    assert_stored_as(&redis, &app, b"203.0.113.5", "203.0.113.5").await;
    assert_stored_as(&redis, &app, b"2001:db8::/64", "2001:db8::/64").await;
    // 64 bytes is the longest key stored verbatim.
    let longest = "k".repeat(64);
    assert_stored_as(&redis, &app, longest.as_bytes(), &longest).await;
}

/// A 1000-byte key is stored as its digest; a key differing in its last byte gets a different
/// digest and a limit of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_keys_are_stored_as_digests() {
    let redis = RedisServer::start();
    let app = app(&redis, "ratelimit");
    let long = vec![b'a'; 1000];
    let stored = digest(&long);
    assert_eq!(stored.len(), 33);
    assert!(
        stored[1..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_stored_as(&redis, &app, &long, &stored).await;

    let mut other = long.clone();
    other[999] = b'b';
    assert_ne!(digest(&other), stored);
    assert_stored_as(&redis, &app, &other, &digest(&other)).await;

    // Just over the verbatim bound.
    let over = vec![b'k'; 65];
    assert_stored_as(&redis, &app, &over, &digest(&over)).await;
    // No client key in Redis is longer than the bound allows.
    assert!(
        redis.keys().iter().all(|key| hash_tag(key).len() <= 64),
        "{:?}",
        redis.keys()
    );
}

/// Keys with bytes that are not printable, or that could end the hash tag early (`}`), open
/// another (`{`), or pose as a digest (`#`), are stored as digests too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_tag_breaking_keys_are_stored_as_digests() {
    let redis = RedisServer::start();
    let app = app(&redis, "ratelimit");
    let keys: [&[u8]; 6] = [
        b"\x00\x01\x02\xff",
        b"line\nbreak",
        b"with space",
        b"a}b",
        b"{tag}",
        b"#0123456789abcdef0123456789abcdef",
    ];
    for key in keys {
        assert_stored_as(&redis, &app, key, &digest(key)).await;
    }
    // Each of them got its own limit: 6 clients, 2 keys each.
    assert_eq!(redis.keys().len(), 12);
}

/// The prefix is the first part of every key; the client is still the hash tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefix_starts_every_key() {
    let redis = RedisServer::start();
    let app = app(&redis, "shop.v2");
    assert_eq!(request(&app, b"alice").await.1, "Allow");
    let long = vec![7u8; 300];
    assert_eq!(request(&app, &long).await.1, "Allow");
    let keys: BTreeSet<String> = redis.keys().into_iter().collect();
    let expected: BTreeSet<String> = keys_of("shop.v2", "alice")
        .into_iter()
        .chain(keys_of("shop.v2", &digest(&long)))
        .collect();
    assert_eq!(keys, expected);
}

/// After the rule name, a key names the algorithm and the time base its state is counted in, so
/// a quota changed under the same name finds the old state only where it still reads the same:
/// a window's new limit, GCRA's new burst. A new period, rate, sub-interval count or token bucket
/// burst names another key, and the old one expires by its TTL.
#[test]
fn keys_name_the_time_base_of_their_state() {
    // Building the store connects to nothing.
    let store = RedisStore::open("redis://127.0.0.1:1").unwrap();
    let key_of = |rule: Rule| {
        let policy = tower_redis_ratelimit::Policy::try_from(rule).unwrap();
        let mut keys = store.state_keys(&Key::from("alice"), &policy);
        assert_eq!(keys.len(), 1);
        keys.remove(0)
    };
    let minutes = Quota::new(3, Duration::from_secs(90));
    for (rule, key) in [
        (
            Rule::fixed_window("a", minutes),
            "ratelimit:a:fw-90s:{alice}",
        ),
        (
            Rule::fixed_window("a", Quota::new(9, Duration::from_secs(90))),
            "ratelimit:a:fw-90s:{alice}",
        ),
        (
            Rule::fixed_window("a", Quota::new(3, Duration::from_millis(1_500))),
            "ratelimit:a:fw-1500ms:{alice}",
        ),
        (
            Rule::sliding_log("a", minutes),
            "ratelimit:a:log-90s:{alice}",
        ),
        (
            Rule::sliding_log("a", Quota::per_day(3)),
            "ratelimit:a:log-1d:{alice}",
        ),
        // The audit's case: 3 per minute and 5 per hour, both in 60 sub-intervals.
        (
            Rule::sliding_window("a", Quota::per_minute(3), 60),
            "ratelimit:a:sw60-1m:{alice}",
        ),
        (
            Rule::sliding_window("a", Quota::per_hour(5), 60),
            "ratelimit:a:sw60-1h:{alice}",
        ),
        (
            Rule::sliding_window("a", Quota::per_minute(5), 60),
            "ratelimit:a:sw60-1m:{alice}",
        ),
        (
            Rule::gcra("a", Quota::per_second(3)),
            "ratelimit:a:gcra-3/1s:{alice}",
        ),
        (
            Rule::gcra("a", Quota::per_second(3).with_burst(10)),
            "ratelimit:a:gcra-3/1s:{alice}",
        ),
        (
            Rule::gcra("a", Quota::per_second(10)),
            "ratelimit:a:gcra-10/1s:{alice}",
        ),
        (
            Rule::token_bucket("a", Quota::per_second(3)),
            "ratelimit:a:tb3-3/1s:{alice}",
        ),
        (
            Rule::token_bucket("a", Quota::per_second(3).with_burst(10)),
            "ratelimit:a:tb10-3/1s:{alice}",
        ),
        (
            Rule::token_bucket("a", Quota::per_minute(180).with_burst(3)),
            "ratelimit:a:tb3-180/1m:{alice}",
        ),
    ] {
        assert_eq!(key_of(rule.clone()), key, "{rule:?}");
    }
}
