//! `HeaderKey`: each value of a header is a key, trimmed; a missing, blank or repeated header is a
//! 400 naming it; several headers join into one key without ambiguity.

use super::{LIMIT, app, assert_bad_request, hit, used};
use crate::support::get as send;
use tower_redis_ratelimit::MemoryStore;
use tower_redis_ratelimit::key::HeaderKey;

#[tokio::test]
async fn header_key_limits_each_value_and_trims_it() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("x-api-key"), &store);
    let peer = "203.0.113.1:1000";
    assert_eq!(
        hit(&app, peer, &[("x-api-key", "k1")]).await,
        (200, "1".into())
    );
    // Surrounding whitespace is not part of the key; the header name is case-insensitive.
    assert_eq!(
        hit(&app, peer, &[("X-Api-Key", " k1 ")]).await,
        (200, "2".into())
    );
    // Another client address with the same key shares the limit.
    assert_eq!(
        hit(&app, "198.51.100.2:2", &[("x-api-key", "k1")]).await,
        (200, "3".into())
    );
    assert_eq!(
        hit(&app, peer, &[("x-api-key", "k1")]).await,
        (429, "3".into())
    );
    // Another key has its own limit.
    assert_eq!(
        hit(&app, peer, &[("x-api-key", "k2")]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, "k1").await, 3);
    assert_eq!(used(&store, "k2").await, 1);
}

#[tokio::test]
async fn header_key_missing_blank_or_repeated_is_a_400_naming_the_header() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("X-Api-Key"), &store);
    let peer = "203.0.113.1:1000";
    assert_bad_request(
        send(&app, "/", peer, &[]).await,
        "the `x-api-key` header is missing",
    )
    .await;
    assert_bad_request(
        send(&app, "/", peer, &[("x-api-key", "   ")]).await,
        "the `x-api-key` header is empty",
    )
    .await;
    // Two lines: letting the client pick which one counts would let it pick a fresh limit.
    assert_bad_request(
        send(&app, "/", peer, &[("x-api-key", "k1"), ("x-api-key", "k2")]).await,
        "the `x-api-key` header must appear only once",
    )
    .await;
    // None of those counted against anything.
    assert_eq!(store.len(), 0);
}

#[tokio::test]
async fn header_key_joins_several_headers_unambiguously() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("x-tenant").and("x-user"), &store);
    let peer = "203.0.113.1:1000";
    let acme_alice = [("x-tenant", "acme"), ("x-user", "alice")];
    for expected in 1..=LIMIT {
        assert_eq!(
            hit(&app, peer, &acme_alice).await,
            (200, expected.to_string())
        );
    }
    assert_eq!(hit(&app, peer, &acme_alice).await.0, 429);
    // Same user in another tenant, same tenant another user: each its own limit.
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "other"), ("x-user", "alice")]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "acme"), ("x-user", "bob")]).await,
        (200, "1".into())
    );
    // A separator inside a value cannot forge another pair's key.
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "a-b"), ("x-user", "c")]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "a"), ("x-user", "b-c")]).await,
        (200, "1".into())
    );
    // The key is the values, in order, joined by the unit separator.
    assert_eq!(used(&store, b"acme\x1falice".as_slice()).await, LIMIT);
    assert_eq!(used(&store, b"other\x1falice".as_slice()).await, 1);
    // Both headers are required.
    assert_bad_request(
        send(&app, "/", peer, &[("x-tenant", "acme")]).await,
        "the `x-user` header is missing",
    )
    .await;
    assert_bad_request(
        send(&app, "/", peer, &[("x-user", "alice")]).await,
        "the `x-tenant` header is missing",
    )
    .await;
}
