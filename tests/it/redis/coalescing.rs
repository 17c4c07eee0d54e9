//! Hot-key coalescing: requests for a key with a call in flight go to Redis together, one call
//! deciding each in order. Exact (the same decisions as one call each, in order), fewer round
//! trips, and robust to a caller that gives up and to an outage.

use std::time::Duration;

use futures_util::future::join_all;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, Policy, Quota, RedisStore, Rule, Store};

use crate::support::RedisServer;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;

fn store(server: &RedisServer, clock: &ManualClock, coalesce: bool) -> RedisStore {
    RedisStore::builder(&server.url())
        .prefix(if coalesce { "coalesced" } else { "alone" })
        .clock(clock.clone())
        .denial_cache(0)
        .coalesce(coalesce)
        .build()
        .unwrap()
}

fn policies() -> Vec<Policy> {
    let quota = Quota::per_minute(20).with_burst(20);
    vec![
        Policy::try_from(Rule::fixed_window("fw", quota)).unwrap(),
        Policy::try_from(Rule::gcra("gcra", quota)).unwrap(),
        Policy::try_from(Rule::sliding_log("log", quota)).unwrap(),
        Policy::try_from(Rule::sliding_window("sw", quota, 6)).unwrap(),
        Policy::try_from(Rule::token_bucket("tb", quota)).unwrap(),
        Policy::new([
            Rule::gcra("a", Quota::per_minute(12).with_burst(12)),
            Rule::fixed_window("b", Quota::per_minute(15)),
        ])
        .unwrap(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_decides_exactly_as_one_call_per_request_in_order() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let (coalesced, alone) = (store(&server, &clock, true), store(&server, &clock, false));
    let mut rng = fastrand::Rng::with_seed(11);
    for policy in policies() {
        for round in 0..5 {
            let costs: Vec<u32> = (0..40).map(|_| rng.u32(0..4)).collect();
            let key = Key::from(format!("round-{round}"));
            // Every check joins the queue when it is made, in this order; the first leads.
            let together: Vec<Decision> = join_all(
                costs
                    .iter()
                    .map(|&cost| coalesced.check(&key, &policy, cost)),
            )
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
            let mut one_by_one = Vec::new();
            for &cost in &costs {
                one_by_one.push(alone.check(&key, &policy, cost).await.unwrap());
            }
            assert_eq!(together, one_by_one, "{policy:?}, round {round}");
            clock.advance(Duration::from_secs(7));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_costs_one_call_per_batch() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, true);
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(50))).unwrap();
    // Load the script first, so only decisions are counted.
    store.check(&Key::from("warm"), &policy, 0).await.unwrap();
    let before = server.evalsha_calls();
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let (store, policy) = (store.clone(), policy.clone());
            tokio::spawn(async move { store.check(&Key::from("hot"), &policy, 1).await })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        if task.await.unwrap().unwrap().is_allowed() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 50, "exactly the quota");
    let spent = server.evalsha_calls() - before;
    assert!(spent <= 20, "{spent} calls for 200 concurrent requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_gives_up_does_not_strand_the_others() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, true);
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(50))).unwrap();
    let key = Key::from("k");
    // The lead is dropped before it is ever polled: its call is never sent, and the one waiting
    // behind it is decided all the same.
    let lead = store.check(&key, &policy, 1);
    let waiting = store.check(&key, &policy, 1);
    drop(lead);
    let decision = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiter is answered")
        .unwrap();
    assert_eq!(decision.used(), 1);
    // And the key is not wedged.
    assert_eq!(store.check(&key, &policy, 1).await.unwrap().used(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_every_waiter_promptly() {
    let mut server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, true);
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(50))).unwrap();
    store.check(&Key::from("warm"), &policy, 1).await.unwrap();
    server.kill();
    let answers = tokio::time::timeout(
        Duration::from_secs(5),
        join_all((0..20).map(|_| store.check(&Key::from("k"), &policy, 1))),
    )
    .await
    .expect("no waiter hangs");
    assert!(answers.iter().all(Result::is_err), "{answers:?}");
    server.restart();
    crate::support::eventually(Duration::from_secs(10), "decisions again", || async {
        store.check(&Key::from("k"), &policy, 1).await.is_ok()
    })
    .await;
}
