//! The memory store under contention: many tasks of a multi-thread runtime checking one key at
//! once admit exactly the quota, for every algorithm, and so do policies of one rule and of
//! several that share the key's state.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::FutureExt;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::policy::Algorithm;
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, Rule, Store};

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const TASKS: u64 = 8;
const EACH: u64 = 400;
const QUOTA: u32 = 1_000;

/// `TASKS` tasks on four worker threads each send `EACH` requests for one key, taking turns
/// through `policies`; the clock stands still, so nothing refills. Returns how many were admitted.
async fn hammer(policies: Vec<Policy>) -> u64 {
    let store = MemoryStore::builder().clock(ManualClock::new(T0)).build();
    let policies: Arc<[Policy]> = policies.into();
    let admitted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (store, policies, admitted) =
                (store.clone(), Arc::clone(&policies), Arc::clone(&admitted));
            tokio::spawn(async move {
                let key = Key::from("hot");
                for i in 0..EACH {
                    let policy = &policies[((task + i) % policies.len() as u64) as usize];
                    let decision = store
                        .check(&key, policy, 1)
                        .now_or_never()
                        .expect("the memory store answers at once")
                        .unwrap();
                    if decision.is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

fn rule(algorithm: Algorithm) -> Rule {
    Rule::new("hot", algorithm, Quota::per_hour(QUOTA))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_on_one_key_admit_exactly_the_quota() {
    for algorithm in [
        Algorithm::Gcra,
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow { sub_intervals: 10 },
        Algorithm::SlidingLog,
    ] {
        let policy = Policy::try_from(rule(algorithm)).unwrap();
        assert_eq!(
            hammer(vec![policy]).await,
            u64::from(QUOTA),
            "{algorithm:?}: {} requests at once",
            TASKS * EACH
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_rule_and_several_sharing_a_key_admit_exactly_the_quota_together() {
    for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
        let alone = Policy::try_from(rule(algorithm)).unwrap();
        // The same rule beside one that never refuses: its state is the same counter.
        let with_another = Policy::new([
            rule(algorithm),
            Rule::fixed_window("roomy", Quota::per_hour(1_000_000)),
        ])
        .unwrap();
        assert_eq!(
            hammer(vec![alone, with_another]).await,
            u64::from(QUOTA),
            "{algorithm:?}"
        );
    }
}
