//! The other extractors: a `UserId` set by an earlier middleware (axum or tower), `GlobalKey`,
//! closures and their errors, `or`, and `MissingKey::Skip`.

use super::{LIMIT, app, assert_bad_request, hit, layer, rule, used};
use crate::support::{get as send, text};
use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::routing::get;
use http::request::Parts;
use tower::ServiceBuilder;
use tower_redis_ratelimit::admission::MissingKey;
use tower_redis_ratelimit::key::{
    self, ClientIp, GlobalKey, HeaderKey, Key, KeyError, KeyExtractorExt, UserId,
};
use tower_redis_ratelimit::{MemoryStore, RateLimitLayer};

/// A stand-in authentication middleware: `authorization: user <id>` becomes a `UserId`.
async fn authenticate(mut request: Request, next: Next) -> axum::response::Response {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("user "))
        .map(|id| UserId::new(id.to_owned()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

#[tokio::test]
async fn user_id_from_an_earlier_axum_middleware_keys_the_request() {
    let store = MemoryStore::new();
    // The last `layer` call is the outermost: authentication runs before the rate limit.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer(UserId::key(), &store))
        .layer(middleware::from_fn(authenticate));
    let alice = [("authorization", "user alice")];
    // One user from several addresses is one client.
    for (index, peer) in ["203.0.113.1:1", "203.0.113.2:1", "198.51.100.3:1"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            hit(&app, peer, &alice).await,
            (200, (index + 1).to_string())
        );
    }
    assert_eq!(hit(&app, "203.0.113.1:1", &alice).await.0, 429);
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("authorization", "user bob")]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, "alice").await, LIMIT);
    assert_eq!(used(&store, "bob").await, 1);
    assert_bad_request(
        send(&app, "/", "203.0.113.1:1", &[]).await,
        "the request carries no UserId (is the authentication layer in front of the rate limit?)",
    )
    .await;
}

#[tokio::test]
async fn user_id_from_an_earlier_tower_layer_keys_the_request() {
    let store = MemoryStore::new();
    let stack = ServiceBuilder::new()
        .map_request(|mut request: Request| {
            let id = request
                .headers()
                .get("x-session")
                .map(|session| format!("user-of-{}", session.to_str().unwrap()));
            if let Some(id) = id {
                request.extensions_mut().insert(UserId::new(id));
            }
            request
        })
        .layer(layer(UserId::key(), &store));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(stack);
    let session = [("x-session", "s1")];
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(hit(&app, "203.0.113.1:1", &session).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, "user-of-s1").await, LIMIT);
}

#[tokio::test]
async fn user_id_inserted_after_the_rate_limit_is_too_late() {
    let store = MemoryStore::new();
    // Wrong order: the rate limit is outermost and never sees the user.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(middleware::from_fn(authenticate))
        .layer(layer(UserId::key(), &store));
    assert_bad_request(
        send(
            &app,
            "/",
            "203.0.113.1:1",
            &[("authorization", "user alice")],
        )
        .await,
        "the request carries no UserId (is the authentication layer in front of the rate limit?)",
    )
    .await;
}

#[tokio::test]
async fn global_key_counts_every_request_against_one_limit() {
    let store = MemoryStore::new();
    let app = app(GlobalKey::new("everyone"), &store);
    let requests: [(&str, &[(&str, &str)]); 4] = [
        ("203.0.113.1:1", &[]),
        ("[2001:db8::1]:1", &[("x-api-key", "k1")]),
        ("198.51.100.9:1", &[("authorization", "user alice")]),
        ("203.0.113.77:1", &[]),
    ];
    let mut results = Vec::new();
    for (peer, headers) in requests {
        results.push(hit(&app, peer, headers).await);
    }
    assert_eq!(
        results,
        [
            (200, "1".into()),
            (200, "2".into()),
            (200, "3".into()),
            (429, "3".into())
        ]
    );
    assert_eq!(used(&store, "everyone").await, LIMIT);
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn a_closure_is_an_extractor_and_its_errors_are_400s() {
    let store = MemoryStore::new();
    // Keys by the `tenant` query parameter.
    let by_tenant = |parts: &Parts| -> Result<Key, KeyError> {
        let query = parts.uri.query().unwrap_or("");
        let tenant = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("tenant="))
            .ok_or_else(|| KeyError::missing("the `tenant` query parameter is missing"))?;
        if tenant.is_empty() || !tenant.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(KeyError::invalid("the `tenant` must be alphanumeric"));
        }
        Ok(Key::from(format!("tenant:{tenant}")))
    };
    let app = app(by_tenant, &store);
    let peer = "203.0.113.1:1";
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(
            send(&app, "/?tenant=acme", peer, &[])
                .await
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(
        send(&app, "/?x=1&tenant=other", peer, &[]).await.status(),
        200
    );
    assert_eq!(used(&store, "tenant:acme").await, LIMIT);
    assert_eq!(used(&store, "tenant:other").await, 1);
    assert_bad_request(
        send(&app, "/", peer, &[]).await,
        "the `tenant` query parameter is missing",
    )
    .await;
    assert_bad_request(
        send(&app, "/?tenant=a.b", peer, &[]).await,
        "the `tenant` must be alphanumeric",
    )
    .await;
}

/// The obvious closure, with no type annotation and no `http` import: `key::from_fn` infers the
/// request head, and a `None` is a missing key.
#[tokio::test]
async fn from_fn_takes_a_closure_without_annotations() {
    let store = MemoryStore::new();
    let by_tenant = key::from_fn(|parts| {
        parts
            .headers
            .get("x-tenant")
            .map(|tenant| Key::from(tenant.as_bytes()))
    });
    let app = app(by_tenant, &store);
    let peer = "203.0.113.1:1";
    for _ in 0..2 {
        let response = send(&app, "/", peer, &[("x-tenant", "acme")]).await;
        assert_eq!(response.status(), 200);
    }
    assert_eq!(used(&store, "acme").await, 2);
    assert_bad_request(
        send(&app, "/", peer, &[]).await,
        "the key function found no key in this request",
    )
    .await;
}

#[tokio::test]
async fn or_uses_the_api_key_when_there_is_one_and_the_peer_otherwise() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("x-api-key").or(ClientIp::peer()), &store);
    // With a key: one limit for the key, from any address.
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("x-api-key", "k1")]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, "203.0.113.2:1", &[("x-api-key", "k1")]).await,
        (200, "2".into())
    );
    // Without: the address, whose limit is separate from the key's.
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await, (200, "1".into()));
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await, (200, "2".into()));
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await, (200, "3".into()));
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await.0, 429);
    // A blank key is a missing key: the address again, already exhausted.
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("x-api-key", " ")]).await.0,
        429
    );
    // Still room under the key.
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("x-api-key", "k1")]).await,
        (200, "3".into())
    );
    assert_eq!(used(&store, "k1").await, LIMIT);
    assert_eq!(used(&store, "203.0.113.1").await, LIMIT);
    assert_eq!(used(&store, "203.0.113.2").await, 0);
    // A repeated key is invalid, not missing: no fallback to a limit of the client's choosing.
    assert_bad_request(
        send(
            &app,
            "/",
            "203.0.113.9:1",
            &[("x-api-key", "k1"), ("x-api-key", "k2")],
        )
        .await,
        "the `x-api-key` header must appear only once",
    )
    .await;
    assert_eq!(used(&store, "203.0.113.9").await, 0);
}

#[tokio::test]
async fn missing_key_skip_passes_without_limit_or_headers() {
    let store = MemoryStore::new();
    let layer = RateLimitLayer::builder()
        .rule(rule())
        .key(HeaderKey::new("x-api-key"))
        .store(store.clone())
        .on_missing_key(MissingKey::Skip)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    // Without a key: never limited, no rate-limit headers at all.
    for _ in 0..(LIMIT * 3) {
        let response = send(&app, "/", "203.0.113.1:1", &[]).await;
        assert_eq!(response.status(), 200);
        let names: Vec<String> = response
            .headers()
            .keys()
            .map(|name| name.as_str().to_owned())
            .collect();
        for name in &names {
            assert!(
                !name.contains("rate") && name != "retry-after",
                "unexpected header {name} on a skipped request"
            );
        }
        assert_eq!(text(response).await, "ok");
    }
    assert_eq!(store.len(), 0);
    // With a key: limited as usual.
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(hit(&app, "203.0.113.1:1", &[("x-api-key", "k1")]).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    // An invalid key is not a missing one and is not skipped: otherwise the exhausted client
    // would send its key twice (a handler reading the first value still authenticates it) and
    // pass unlimited.
    for _ in 0..LIMIT {
        assert_bad_request(
            send(
                &app,
                "/",
                "203.0.113.1:1",
                &[("x-api-key", "k1"), ("x-api-key", "k1")],
            )
            .await,
            "the `x-api-key` header must appear only once",
        )
        .await;
    }
    assert_eq!(used(&store, "k1").await, LIMIT);
}
