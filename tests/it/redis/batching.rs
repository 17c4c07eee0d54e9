//! Batching: decisions of a policy that arrive while a call of it is in flight go to Redis
//! together, one call deciding each in order, whatever their keys. Exact (the same decisions,
//! counts and waits as one call each, in order), fewer calls, a lone request sent at once, never
//! a cross-slot call on a cluster, and robust to a caller that gives up and to an outage.

use std::time::Duration;

use futures_util::future::join_all;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, Policy, Quota, RedisStore, Rule, Store};

use crate::support::RedisServer;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;

fn store(server: &RedisServer, clock: &ManualClock, batch: bool) -> RedisStore {
    RedisStore::builder(&server.url())
        .prefix(if batch { "batched" } else { "alone" })
        .clock(clock.clone())
        .denial_cache(0)
        .batch(batch)
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

/// `requests` checked together on `batched` (each joins its policy's queue when it is made, in
/// this order: the first is sent alone, the rest wait for it), then one by one on `alone`.
async fn together_and_one_by_one(
    batched: &RedisStore,
    alone: &RedisStore,
    policy: &Policy,
    requests: &[(Key, u32)],
) -> (Vec<Decision>, Vec<Decision>) {
    let together = join_all(
        requests
            .iter()
            .map(|(key, cost)| batched.check(key, policy, *cost)),
    )
    .await
    .into_iter()
    .map(|answer| answer.expect("every batched call answered"))
    .collect();
    let mut one_by_one = Vec::new();
    for (key, cost) in requests {
        one_by_one.push(alone.check(key, policy, *cost).await.unwrap());
    }
    (together, one_by_one)
}

/// Keys drawn from a few, so that batches hold one key several times and several keys; the same
/// clock for both stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_many_keys_decides_exactly_as_one_call_per_request_in_order() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let (batched, alone) = (store(&server, &clock, true), store(&server, &clock, false));
    let mut rng = fastrand::Rng::with_seed(11);
    for policy in policies() {
        for round in 0..5 {
            let requests: Vec<(Key, u32)> = (0..150)
                .map(|_| {
                    let key = Key::from(format!("round-{round}-key-{}", rng.u32(0..6)));
                    (key, rng.u32(0..4))
                })
                .collect();
            let (together, one_by_one) =
                together_and_one_by_one(&batched, &alone, &policy, &requests).await;
            assert_eq!(together, one_by_one, "{policy:?}, round {round}");
            assert!(together.iter().any(Decision::is_allowed));
            assert!(together.iter().any(|decision| !decision.is_allowed()));
            clock.advance(Duration::from_secs(7));
        }
    }
}

/// 200 checks made at once, of two keys: the first is sent alone; the others queue behind it,
/// and leave in batches of up to 128 as the call before them ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_cost_one_call_per_batch_and_a_lone_one_is_sent_at_once() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, true);
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(50))).unwrap();
    // Load the library first, so only decisions are counted.
    store.check(&Key::from("warm"), &policy, 0).await.unwrap();
    let before = server.script_calls();
    let answers = join_all((0..200).map(|i| {
        let key = if i % 2 == 0 { "hot" } else { "elsewhere" };
        store.check(&Key::from(key), &policy, 1)
    }))
    .await;
    let admitted = |key: usize| {
        answers
            .iter()
            .skip(key)
            .step_by(2)
            .filter(|answer| answer.as_ref().unwrap().is_allowed())
            .count()
    };
    assert_eq!(
        (admitted(0), admitted(1)),
        (50, 50),
        "exactly each key's quota"
    );
    assert_eq!(server.script_calls() - before, 1 + 2);
    // Alone, a request waits for nothing: one call.
    let before = server.script_calls();
    let lone = store.check(&Key::from("lone"), &policy, 1).await.unwrap();
    assert!(lone.is_allowed());
    assert_eq!(server.script_calls() - before, 1);
}

/// On a cluster every key of one call must be in one slot: concurrent requests of many keys (on
/// every primary) are batched per slot, decided exactly as one call each, with no `CROSSSLOT`.
#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_batches_never_cross_a_slot() {
    let cluster = crate::support::cluster::RedisCluster::start();
    let clock = ManualClock::new(T0);
    let store = |batch: bool| {
        RedisStore::cluster(cluster.urls())
            .prefix(if batch { "batched" } else { "alone" })
            .clock(clock.clone())
            .denial_cache(0)
            .batch(batch)
            .build()
            .unwrap()
    };
    let (batched, alone) = (store(true), store(false));
    let policy = &policies()[5];
    let mut rng = fastrand::Rng::with_seed(5);
    let requests: Vec<(Key, u32)> = (0..300)
        .map(|_| (Key::from(format!("key-{}", rng.u32(0..40))), rng.u32(1..3)))
        .collect();
    // The library loaded first (on every primary at once), so only decisions are counted.
    batched.check(&Key::from("warm"), policy, 0).await.unwrap();
    let before: u64 = (0..6).map(|node| cluster.node(node).script_calls()).sum();
    let (together, one_by_one) = together_and_one_by_one(&batched, &alone, policy, &requests).await;
    assert_eq!(together, one_by_one);
    let calls = (0..6)
        .map(|node| cluster.node(node).script_calls())
        .sum::<u64>()
        - before;
    // The store that does not batch made 300 calls; the batching one about two per key (its
    // first alone, then its batch), 40 keys in (almost surely) 40 slots.
    assert!(calls < 300 + 3 * 40, "{calls} calls");
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
