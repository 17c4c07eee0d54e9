//! Quota leases: a hot key's quota reserved a slice at a time and spent in process. The fleet
//! never spends more than Redis granted (exact counts once unspent units are given back), a hot
//! key costs Redis a few calls instead of one per request, and what leases cannot hold exactly
//! is decided by Redis.

use std::time::Duration;

use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::QuotaLeases;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

use crate::support::{RedisServer, eventually};

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;

fn store(server: &RedisServer, clock: &ManualClock, leases: QuotaLeases) -> RedisStore {
    RedisStore::builder(&server.url())
        .prefix("leased")
        .clock(clock.clone())
        .quota_leases(leases)
        .build()
        .unwrap()
}

fn policy(rule: Rule) -> Policy {
    Policy::try_from(rule).unwrap()
}

/// Checks `key` `n` times with cost 1; how many were admitted.
async fn admitted(store: &RedisStore, key: &str, policy: &Policy, n: usize) -> u64 {
    let key = Key::from(key);
    let mut admitted = 0;
    for _ in 0..n {
        if store.check(&key, policy, 1).await.unwrap().is_allowed() {
            admitted += 1;
        }
    }
    admitted
}

/// What Redis says is in use for `key` (a cost-0 check on a store without leases).
async fn used_in_redis(
    server: &RedisServer,
    clock: &ManualClock,
    key: &str,
    policy: &Policy,
) -> u64 {
    let exact = RedisStore::builder(&server.url())
        .prefix("leased")
        .clock(clock.clone())
        .denial_cache(0)
        .build()
        .unwrap();
    exact
        .check(&Key::from(key), policy, 0)
        .await
        .unwrap()
        .used()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_costs_redis_a_few_calls_not_one_per_request() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, QuotaLeases::default());
    let policy = policy(Rule::fixed_window("api", Quota::per_minute(100_000)));
    let before = server.script_calls();
    let key = Key::from("hot");
    for n in 1..=5_000 {
        let decision = store.check(&key, &policy, 1).await.unwrap();
        assert!(decision.is_allowed());
        // One instance: what its slices hold is what Redis would still admit, so the counts are
        // Redis's own.
        assert_eq!((decision.used(), decision.remaining()), (n, 100_000 - n));
    }
    // The slices double as the key proves hot (2, 4, ... units), then follow its demand; every
    // call, grants in the background included, is counted.
    let spent = server.script_calls() - before;
    assert!(spent <= 100, "{spent} calls for 5,000 requests");
    // Every unit Redis counts was spent, or is held here and goes back on shutdown.
    store.return_leases().await.unwrap();
    assert_eq!(used_in_redis(&server, &clock, "hot", &policy).await, 5_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_sharing_a_key_never_admit_more_than_the_quota() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let leases = QuotaLeases::default().max_share(0.1);
    for rule in [
        Rule::fixed_window("fw", Quota::per_minute(1_000)),
        Rule::gcra("gcra", Quota::per_minute(1_000).with_burst(1_000)),
        Rule::token_bucket("tb", Quota::per_minute(1_000).with_burst(1_000)),
    ] {
        let policy = policy(rule);
        let instances: Vec<RedisStore> = (0..4)
            .map(|_| store(&server, &clock, leases.clone()))
            .collect();
        // The clock stands still: nothing comes back with time, so the quota is 1,000 in all.
        let tasks: Vec<_> = instances
            .iter()
            .map(|store| {
                let (store, policy) = (store.clone(), policy.clone());
                tokio::spawn(async move { admitted(&store, "shared", &policy, 600).await })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.unwrap();
        }
        let name = policy.rules()[0].name().to_owned();
        assert!(total <= 1_000, "{name}: {total} admitted");
        // Under-admission is bounded by the slices others hold: 4 instances × 10% of 1,000.
        assert!(total >= 1_000 - 4 * 100, "{name}: only {total} admitted");
        for store in &instances {
            store.return_leases().await.unwrap();
        }
        // Once every unspent unit is back, Redis counts exactly what was admitted.
        assert_eq!(
            used_in_redis(&server, &clock, "shared", &policy).await,
            total,
            "{name}"
        );
    }
}

/// `return_leases` right after a request whose lease ran low: the slice that request asked for
/// in the background has not even started (one thread: its task runs only once the test
/// waits), yet it is waited for and its units come back, so Redis counts exactly what was
/// admitted after every round, however many requests the round had.
#[tokio::test]
async fn return_leases_takes_back_a_slice_asked_for_just_before() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, QuotaLeases::default());
    let policy = policy(Rule::gcra(
        "api",
        Quota::per_hour(100_000).with_burst(100_000),
    ));
    let mut total = 0;
    for requests in 1..=40 {
        total += admitted(&store, "round", &policy, requests).await;
        store.return_leases().await.unwrap();
        assert_eq!(
            used_in_redis(&server, &clock, "round", &policy).await,
            total,
            "after a round of {requests}"
        );
    }
    assert_eq!(total, (1..=40).sum::<u64>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unspent_units_go_back_when_a_lease_expires() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(
        &server,
        &clock,
        QuotaLeases::default().lifetime(Duration::from_millis(100)),
    );
    let policy = policy(Rule::gcra("api", Quota::per_hour(1_000).with_burst(1_000)));
    assert_eq!(admitted(&store, "quiet", &policy, 50).await, 50);
    // Slices hold more than was spent...
    let held = used_in_redis(&server, &clock, "quiet", &policy).await;
    assert!(held > 50, "nothing reserved beyond what was spent: {held}");
    // ...until their lifetime ends: the background sweep gives the rest back. GCRA drains by
    // one unit every 3.6 s: 100 ms later, Redis holds exactly what was spent.
    clock.advance(Duration::from_millis(100));
    eventually(
        Duration::from_secs(5),
        "unspent units given back",
        || async { used_in_redis(&server, &clock, "quiet", &policy).await == 50 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_lease_ends_with_its_window() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(
        &server,
        &clock,
        QuotaLeases::default()
            .lifetime(Duration::from_secs(60))
            .max_share(1.0),
    );
    let policy = policy(Rule::fixed_window(
        "api",
        Quota::new(100, Duration::from_secs(1)),
    ));
    assert_eq!(admitted(&store, "k", &policy, 100).await, 100);
    assert_eq!(admitted(&store, "k", &policy, 10).await, 0);
    // The next window: units reserved in the last one are not spent in it, and it admits its
    // own 100 exactly.
    clock.advance(Duration::from_secs(1));
    assert_eq!(admitted(&store, "k", &policy, 150).await, 100);
    store.return_leases().await.unwrap();
    assert_eq!(used_in_redis(&server, &clock, "k", &policy).await, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_algorithms_are_decided_by_redis_one_call_per_request() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, QuotaLeases::default());
    for rule in [
        Rule::sliding_log("log", Quota::per_minute(1_000)),
        Rule::sliding_window("sw", Quota::per_minute(1_000), 60),
    ] {
        let policy = policy(rule);
        admitted(&store, "warm", &policy, 1).await;
        let before = server.script_calls();
        assert_eq!(admitted(&store, "k", &policy, 200).await, 200);
        assert_eq!(server.script_calls() - before, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_denied_by_redis_answers_as_redis_would() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let leased = store(&server, &clock, QuotaLeases::default().max_share(1.0));
    let policy = policy(Rule::fixed_window(
        "api",
        Quota::new(10, Duration::from_secs(10)),
    ));
    assert_eq!(admitted(&leased, "k", &policy, 10).await, 10);
    let denied = leased.check(&Key::from("k"), &policy, 1).await.unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.remaining(), 0);
    assert_eq!(denied.used(), 10);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
    // A request that can never pass is told so.
    let never = leased.check(&Key::from("k"), &policy, 11).await.unwrap();
    assert_eq!(never.retry_after(), None);
    assert!(!never.is_allowed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_grants_promptly_and_leasing_resumes_after_it() {
    let mut server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, &clock, QuotaLeases::default());
    let policy = policy(Rule::token_bucket(
        "api",
        Quota::per_minute(10_000).with_burst(10_000),
    ));
    assert_eq!(admitted(&store, "k", &policy, 100).await, 100);
    server.kill();
    // Slices already held keep answering; once spent, the next grant fails at once.
    let key = Key::from("k");
    let mut failed = false;
    for _ in 0..10_000 {
        let answer = tokio::time::timeout(Duration::from_secs(3), store.check(&key, &policy, 1))
            .await
            .expect("a check during an outage must not hang");
        if answer.is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "held slices cannot cover 10,000 requests");
    server.restart();
    eventually(Duration::from_secs(10), "leases resume", || async {
        store
            .check(&key, &policy, 1)
            .await
            .is_ok_and(|d| d.is_allowed())
    })
    .await;
}

/// The burst the requests admitted at `admitted` (µs) needed under a GCRA of `per_second`:
/// virtual scheduling without denials, as `benches/lease_accuracy.rs` measures it.
fn burst_needed(admitted: &[u64], per_second: u64) -> u64 {
    let emission = 1_000_000.0 / per_second as f64;
    let (mut tat, mut needed) = (0.0_f64, 0_u64);
    for &at in admitted {
        let at = at as f64;
        tat = tat.max(at) + emission;
        needed = needed.max(((tat - at) / emission).ceil() as u64);
    }
    needed
}

/// A key offered twice its rate, on one instance and on two: the leases reserve a rate (units
/// that drain back within their lifetime, spent only as they conform), so the key stays local,
/// at most a tenth of a Redis call per request, and the admitted requests never need more than
/// the rule's burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_hot_key_costs_a_tenth_of_a_call_per_request_and_never_exceeds_its_rule() {
    let server = RedisServer::start();
    for rule in [
        Rule::gcra("gcra", Quota::per_second(1_000).with_burst(100)),
        Rule::token_bucket("tb", Quota::per_second(1_000).with_burst(100)),
    ] {
        for instances in [1, 2] {
            let clock = ManualClock::new(T0);
            let stores: Vec<RedisStore> = (0..instances)
                .map(|_| store(&server, &clock, QuotaLeases::default()))
                .collect();
            let policy = policy(rule.clone());
            let key = Key::from(format!("saturated-{instances}"));
            let before = server.script_calls();
            // 2,000 requests a second (every 500 µs) for 3 simulated seconds.
            let mut admitted = Vec::new();
            for n in 0..6_000_u64 {
                let at = n * 500;
                clock.set(T0 + at);
                let store = &stores[usize::try_from(n).unwrap() % instances];
                if store.check(&key, &policy, 1).await.unwrap().is_allowed() {
                    admitted.push(at);
                }
                // Let grants asked in the background land, as they would between requests.
                tokio::task::yield_now().await;
            }
            let calls = server.script_calls() - before;
            let name = format!("{} on {instances}", policy.rules()[0].name());
            assert!(calls <= 600, "{name}: {calls} calls for 6,000 requests");
            assert!(
                burst_needed(&admitted, 1_000) <= 100,
                "{name}: a burst of {} needed",
                burst_needed(&admitted, 1_000)
            );
            // 100 at once, then the rate (3,000 in 3 s), less what leases hold at the end.
            assert!(
                admitted.len() >= 2_900,
                "{name}: {} admitted",
                admitted.len()
            );
            for store in &stores {
                store.return_leases().await.unwrap();
            }
        }
    }
}
