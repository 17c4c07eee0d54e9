//! Each rule's own verdict (`Store::check_verdicts`) where a decision tells one rule: a rule
//! that would admit a request another rule refuses tells what it has left, uncounted, alike on
//! both stores and as a read of it alone says.

use std::sync::Arc;

use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RedisStore, Rule, Store};

use super::T0;
use crate::support::RedisServer;

#[tokio::test]
async fn a_rule_that_would_admit_a_refused_request_tells_what_it_has_left_on_both_stores() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let memory = Arc::new(MemoryStore::builder().clock(clock.clone()).build());
    let redis = Arc::new(
        RedisStore::builder(&server.url())
            .prefix("verdicts")
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let wide = Rule::fixed_window("wide", Quota::per_hour(10));
    let gcra = Rule::gcra("gcra", Quota::per_minute(60).with_burst(5));
    let narrow = Rule::sliding_window("narrow", Quota::per_hour(3), 4);
    let policy = Policy::new([wide.clone(), gcra.clone(), narrow]).unwrap();
    let key = Key::from("client");
    let stores: [Arc<dyn Store>; 2] = [memory, redis];
    for store in &stores {
        // Two of cost 1 pass everywhere; a third of cost 2 is over `narrow` (3 an hour).
        for _ in 0..2 {
            let answer = Arc::clone(store).check_verdicts(&key, &policy, 1);
            assert!(answer.await.unwrap().decision().is_allowed());
        }
    }
    let mut answers = Vec::new();
    for store in &stores {
        let answer = Arc::clone(store)
            .check_verdicts(&key, &policy, 2)
            .await
            .unwrap();
        assert!(!answer.decision().is_allowed());
        assert_eq!(answer.decision().rule_index(), 2);
        let outcomes: Vec<Outcome> = answer.rules().iter().map(|rule| rule.outcome()).collect();
        assert_eq!(
            outcomes,
            [Outcome::Allowed, Outcome::Allowed, Outcome::Denied]
        );
        // Nothing was counted: the wide window has 8 left, not 6; the bucket 3, not 1.
        let remaining: Vec<u64> = answer.rules().iter().map(|rule| rule.remaining()).collect();
        assert_eq!(remaining, [8, 3, 1]);
        // As each rule alone says when read.
        for (rule, own) in [wide.clone(), gcra.clone()].into_iter().zip(answer.rules()) {
            let alone = Policy::try_from(rule).unwrap();
            let read = store.check(&key, &alone, 0).await.unwrap();
            assert_eq!(
                (read.remaining(), read.used(), read.full_after()),
                (own.remaining(), own.used(), own.full_after())
            );
        }
        answers.push(answer);
    }
    assert_eq!(answers[0], answers[1], "memory and Redis");
}

/// A store that implements `check` alone, counting its calls.
struct DecisionsOnly {
    inner: MemoryStore,
    calls: std::sync::atomic::AtomicU64,
}

impl Store for DecisionsOnly {
    fn check(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
    ) -> tower_redis_ratelimit::store::StoreFuture<tower_redis_ratelimit::Decision> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.check(key, policy, cost)
    }
}

#[tokio::test]
async fn a_store_that_keeps_only_the_decision_reads_each_other_rule_after_it() {
    let clock = ManualClock::new(T0);
    let only = Arc::new(DecisionsOnly {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        calls: Default::default(),
    });
    let memory = Arc::new(MemoryStore::builder().clock(clock.clone()).build());
    let policy = Policy::new([
        Rule::fixed_window("wide", Quota::per_hour(10)),
        Rule::gcra("gcra", Quota::per_minute(60).with_burst(5)),
        Rule::sliding_log("narrow", Quota::per_hour(2)),
    ])
    .unwrap();
    let key = Key::from("client");
    for (cost, admitted) in [(1, true), (1, true), (1, false)] {
        let read = Arc::clone(&only)
            .check_verdicts(&key, &policy, cost)
            .await
            .unwrap();
        let decided = Arc::clone(&memory)
            .check_verdicts(&key, &policy, cost)
            .await
            .unwrap();
        assert_eq!(read.decision().is_allowed(), admitted);
        assert_eq!(read.rules().len(), 3);
        let counts = |answer: &tower_redis_ratelimit::Verdicts| -> Vec<(u64, u64)> {
            let rules = answer.rules().iter();
            rules.map(|rule| (rule.remaining(), rule.used())).collect()
        };
        assert_eq!(counts(&read), counts(&decided), "cost {cost}");
    }
    // A decision and two reads per request.
    assert_eq!(only.calls.load(std::sync::atomic::Ordering::Relaxed), 9);
}
