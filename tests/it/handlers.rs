//! What a handler sees of the layers in front of it: `Option<Decision>` and
//! `Option<ConcurrencyPermit>`, present when a decision was made or a slot taken, absent when
//! limiting was skipped (the store failed and the layer failed open, or the request had no key
//! and the layer skips such requests), and never a 500.

use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::admission::MissingKey;
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
use tower_redis_ratelimit::key::{GlobalKey, HeaderKey};
use tower_redis_ratelimit::store::permits::{
    Acquired, PermitId, PermitStore, PermitTtl, Renewal, Slot,
};
use tower_redis_ratelimit::store::{StoreError, StoreFuture};
use tower_redis_ratelimit::{
    ConcurrencyLimitLayer, Decision, MemoryStore, Policy, Quota, RateLimitLayer, Rule, Store,
};

use crate::support::{get as send, text};

const PEER: &str = "203.0.113.8:4000";

async fn remaining(decision: Option<Decision>) -> String {
    match decision {
        Some(decision) => format!("{} left", decision.remaining()),
        None => "not limited".to_owned(),
    }
}

async fn slot(permit: Option<ConcurrencyPermit>) -> String {
    match permit {
        Some(permit) => format!("holding {}", permit.slot().name()),
        None => "no slot".to_owned(),
    }
}

/// A store that is down: every call fails at once.
struct Down;

fn down<T>() -> StoreFuture<T> {
    StoreFuture::ready(Err(StoreError::bad_reply("down")))
}

impl Store for Down {
    fn check(
        &self,
        _: &tower_redis_ratelimit::key::Key,
        _: &Policy,
        _: u32,
    ) -> StoreFuture<Decision> {
        down()
    }
}

impl PermitStore for Down {
    fn acquire(&self, _: &Slot, _: PermitId, _: u32, _: PermitTtl) -> StoreFuture<Acquired> {
        down()
    }

    fn release(&self, _: &Slot, _: PermitId) -> StoreFuture<bool> {
        down()
    }

    fn renew(&self, _: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        down()
    }
}

fn rate_limited(store: impl Store) -> Router {
    let limit = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(10)))
        .key(HeaderKey::new("x-api-key"))
        .on_missing_key(MissingKey::Skip)
        .store(store)
        .build()
        .unwrap();
    Router::new().route("/", get(remaining)).layer(limit)
}

fn concurrency_limited(store: impl PermitStore) -> Router {
    let limit = ConcurrencyLimitLayer::builder()
        .name("api")
        .max_in_flight(2)
        .key(GlobalKey::new("everyone"))
        .store(store)
        .build()
        .unwrap();
    Router::new().route("/", get(slot)).layer(limit)
}

async fn body(app: &Router, headers: &[(&str, &str)]) -> String {
    let response = send(app, "/", PEER, headers).await;
    assert_eq!(response.status(), 200);
    text(response).await
}

#[tokio::test]
async fn a_handler_sees_the_decision_when_one_was_made_and_none_otherwise() {
    let app = rate_limited(MemoryStore::new());
    assert_eq!(body(&app, &[("x-api-key", "k")]).await, "9 left");
    // No key, and the layer skips such requests: no decision.
    assert_eq!(body(&app, &[]).await, "not limited");
    // The store is down, and the layer fails open: no decision, and no 500.
    assert_eq!(
        body(&rate_limited(Down), &[("x-api-key", "k")]).await,
        "not limited"
    );
}

#[tokio::test]
async fn a_handler_sees_its_slot_when_it_holds_one_and_none_otherwise() {
    assert_eq!(
        body(&concurrency_limited(MemoryStore::new()), &[]).await,
        "holding api"
    );
    assert_eq!(body(&concurrency_limited(Down), &[]).await, "no slot");
}
