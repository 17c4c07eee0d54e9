//! A client cannot take over another client's counter or slot by sending, as its own key, the
//! digest that stands for the other's long key: verbatim and digested keys live in disjoint spaces,
//! in every store and through every middleware.
//!
//! The forgery: a client whose API key is 100 bytes long is stored under a digest; a second client
//! sends `#` and 32 hex digits of SHA-256 of that key (how a store may spell a digest) as its own
//! key. It must be counted on its own.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, Semaphore};
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::store::permits::PermitStore;
use tower_redis_ratelimit::{
    ConcurrencyLimitLayer, MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store,
};

use crate::support::{RedisServer, get as send, header};

/// A key long enough to be stored as a digest.
fn long_key() -> String {
    "L".repeat(100)
}

/// `#` and the first 16 bytes of the long key's SHA-256, in hex.
fn forged_key() -> String {
    let digest = Sha256::digest(long_key().as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("#{hex}")
}

async fn count(app: &Router, key: &str) -> String {
    let response = send(app, "/", "203.0.113.9:1", &[("x-api-key", key)]).await;
    assert_eq!(response.status(), 200, "key {key:?}");
    header(&response, "rate-limiting-total-requests")
}

async fn rate_limit_counts_the_forger_on_its_own(store: impl Store) {
    let limit = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(10)))
        .key(HeaderKey::new("x-api-key"))
        .store(store)
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(limit);
    assert_eq!(count(&app, &long_key()).await, "1");
    assert_eq!(count(&app, &long_key()).await, "2");
    assert_eq!(
        count(&app, &forged_key()).await,
        "1",
        "the forger has its own counter"
    );
    assert_eq!(
        count(&app, &long_key()).await,
        "3",
        "and the victim keeps its own"
    );
}

async fn concurrency_limit_gives_the_forger_its_own_slot(store: impl PermitStore) {
    let limit = ConcurrencyLimitLayer::builder()
        .name("api")
        .max_in_flight(1)
        .key(HeaderKey::new("x-api-key"))
        .store(store)
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let entered = Arc::new(Notify::new());
    let (wait, enter) = (gate.clone(), entered.clone());
    let app = Router::new()
        .route(
            "/hold",
            get(move || {
                let (wait, enter) = (wait.clone(), enter.clone());
                async move {
                    // The handler runs only once the request holds its slot.
                    enter.notify_one();
                    let _open = wait.acquire().await;
                    "released"
                }
            }),
        )
        .route("/", get(|| async { "ok" }))
        .layer(limit);
    // The victim holds its one slot.
    let victim = tokio::spawn({
        let app = app.clone();
        async move {
            send(
                &app,
                "/hold",
                "203.0.113.9:1",
                &[("x-api-key", &long_key())],
            )
            .await
        }
    });
    entered.notified().await;
    let again = send(&app, "/", "203.0.113.9:1", &[("x-api-key", &long_key())]).await;
    assert_eq!(again.status(), 429, "the victim's one slot is taken");
    // The forger is not counted in the victim's slot.
    let forger = send(&app, "/", "203.0.113.9:1", &[("x-api-key", &forged_key())]).await;
    assert_eq!(forger.status(), 200, "the forger has its own slot");
    gate.add_permits(1);
    assert_eq!(victim.await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_forged_digest_is_its_own_key_in_the_memory_store() {
    rate_limit_counts_the_forger_on_its_own(MemoryStore::new()).await;
    concurrency_limit_gives_the_forger_its_own_slot(MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_digest_is_its_own_key_in_the_redis_store() {
    let server = RedisServer::start();
    let store = || RedisStore::open(&server.url()).unwrap();
    rate_limit_counts_the_forger_on_its_own(store()).await;
    concurrency_limit_gives_the_forger_its_own_slot(store()).await;
    // The Redis store spells the digest of the long key exactly so; the forger's key, which holds
    // a `#`, is digested in turn.
    let keys = server.keys();
    assert!(
        keys.contains(&format!("ratelimit:api:fw-1m:{{{}}}", forged_key())),
        "{keys:?}"
    );
}
