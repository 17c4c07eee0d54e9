//! Resets: a key's state under a policy forgotten by its store, so that its next request finds
//! the whole quota; other keys, and other policies' rules, keep theirs. One scenario, run on the
//! memory store and on the Redis store; a layer resets every policy it has (its plans' too).
//! Across instances: `redis::reset`.

use std::time::Duration;

use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use crate::support::RedisServer;

fn policy(rule: Rule) -> Policy {
    Policy::try_from(rule).unwrap()
}

/// How many of `n` requests of `key` under `policy` are admitted.
async fn admitted(store: &impl Store, key: &str, policy: &Policy, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        if store
            .check(&Key::from(key), policy, 1)
            .await
            .unwrap()
            .is_allowed()
        {
            admitted += 1;
        }
    }
    admitted
}

async fn scenario(store: impl Store + Clone) {
    let hour = Quota::new(2, Duration::from_secs(3_600));
    let api = policy(Rule::fixed_window("api", hour));
    let tokens = policy(Rule::token_bucket("tokens", hour));
    // The same rule as `api` beside another: it counts in the same state.
    let both = Policy::new([
        Rule::fixed_window("api", hour),
        Rule::gcra("burst", Quota::per_hour(100)),
    ])
    .unwrap();
    for (key, policy) in [("a", &api), ("a", &tokens), ("b", &api)] {
        assert_eq!(
            admitted(&store, key, policy, 3).await,
            2,
            "{key} {policy:?}"
        );
    }
    store.reset(&Key::from("a"), &api).await.unwrap();
    assert_eq!(admitted(&store, "a", &api, 3).await, 2, "a's fresh quota");
    assert_eq!(admitted(&store, "a", &tokens, 1).await, 0, "another policy");
    assert_eq!(admitted(&store, "b", &api, 1).await, 0, "another key");
    // A reset of a policy reaches the rules it shares with others.
    assert_eq!(admitted(&store, "a", &both, 1).await, 0);
    store.reset(&Key::from("a"), &api).await.unwrap();
    assert_eq!(admitted(&store, "a", &both, 3).await, 2);

    // A layer resets its default policy and every plan's.
    let pro = policy(Rule::fixed_window("pro", hour));
    let layer = RateLimitLayer::builder()
        .policy(&api)
        .plan("pro", &pro)
        .key(HeaderKey::new("x-client"))
        .store(store.clone())
        .build()
        .unwrap();
    for policy in [&api, &pro] {
        admitted(&store, "c", policy, 3).await;
    }
    layer.reset(&Key::from("c")).await.unwrap();
    for policy in [&api, &pro] {
        assert_eq!(admitted(&store, "c", policy, 3).await, 2, "{policy:?}");
    }
}

#[tokio::test]
async fn the_memory_store_resets_a_key_under_a_policy() {
    scenario(MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_resets_a_key_under_a_policy() {
    let server = RedisServer::start();
    scenario(RedisStore::open(&server.url()).unwrap()).await;
}

/// A store of its own that says nothing of resets: the default refuses, and says so.
#[tokio::test]
async fn a_store_that_cannot_reset_says_so() {
    struct Counting;
    impl Store for Counting {
        fn check(
            &self,
            _: &Key,
            policy: &Policy,
            _: u32,
        ) -> tower_redis_ratelimit::store::StoreFuture<tower_redis_ratelimit::Decision> {
            MemoryStore::new().check(&Key::from("k"), policy, 0)
        }
    }
    let error = Counting
        .reset(
            &Key::from("k"),
            &policy(Rule::gcra("api", Quota::per_second(1))),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        tower_redis_ratelimit::store::StoreErrorKind::ErrorReply
    );
    assert_eq!(
        error.to_string(),
        "the rate-limit store answered with an error: this store cannot reset a key"
    );
}
