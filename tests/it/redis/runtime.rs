//! A `RedisStore` outlives the tokio runtime it was first used on (a store built once and used
//! from several runtimes, as tests and some CLIs do): a connection attempt cut off when that
//! runtime shuts down must not leave the store unable to connect from the next one.
//!
//! Plain `#[test]`s: each builds and drops its own runtimes.

use std::time::{Duration, Instant};

use crate::support::RedisServer;
use tokio::runtime::Runtime;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[test]
fn a_connect_cut_off_by_its_runtime_shutting_down_is_retried_from_the_next_runtime() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(&redis.url())
        // Far longer than the test: the first attempt can only end by its runtime going away.
        .connect_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_hour(2))).unwrap();
    let key = Key::from("client");

    // A frozen server accepts the TCP connection (the kernel does) but never answers the
    // connection handshake, so the attempt is still under way when its runtime shuts down.
    redis.freeze();
    let first = runtime();
    first.block_on(async {
        let check =
            tokio::time::timeout(Duration::from_millis(200), store.check(&key, &policy, 1)).await;
        assert!(check.is_err(), "a frozen Redis answered: {check:?}");
    });
    drop(first);
    redis.thaw();

    runtime().block_on(async {
        // The abandoned attempt may fail a call or two, then the reconnect backoff (at most 1 s)
        // expires and the store connects again. Generous bounds for a busy machine; before the
        // fix no call ever succeeded.
        let give_up = Instant::now() + Duration::from_secs(10);
        let first = loop {
            let check =
                tokio::time::timeout(Duration::from_secs(5), store.check(&key, &policy, 1)).await;
            match check {
                Ok(Ok(decision)) => break decision,
                other => assert!(
                    Instant::now() < give_up,
                    "the store never connected again; last answer: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!((first.outcome(), first.used()), (Outcome::Allowed, 1));
        // Limiting works again, exactly.
        let second = store.check(&key, &policy, 1).await.unwrap();
        assert_eq!((second.outcome(), second.used()), (Outcome::Allowed, 2));
        let third = store.check(&key, &policy, 1).await.unwrap();
        assert_eq!(third.outcome(), Outcome::Denied);
    });
    assert_eq!(
        redis.cli(&["HGET", "ratelimit:api:fw-1h:{client}", "n"]),
        "2"
    );
}
