//! The Redis store on a real Redis Cluster (three primaries, a replica each, started by the
//! test): exact counts with keys over every primary and many instances; concurrency permits and
//! their heartbeat; quota leases; a primary killed under load (fail open serves within the
//! deadline, fail closed answers 503, exact again after the failover without a restart); slots
//! migrated under load with no decision lost.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::store::QuotaLeases;
use tower_redis_ratelimit::store::permits::{PermitId, PermitStore, PermitTtl, Renewal, Slot};
use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use crate::support::cluster::{RedisCluster, slot};
use crate::support::timed_get;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const PEER: &str = "203.0.113.7:4000";
/// The layer's deadline in the failover tests, and the slack a busy machine may add to it.
const DEADLINE: Duration = Duration::from_millis(100);
const SLACK: Duration = Duration::from_millis(150);

fn store(cluster: &RedisCluster, clock: &ManualClock) -> RedisStore {
    RedisStore::cluster(cluster.urls())
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Every algorithm alone, and all five in one policy.
fn policies() -> Vec<Policy> {
    let quota = Quota::per_minute(5).with_burst(5);
    // Rules named by `prefix`, so that each policy keeps state of its own.
    let rules = |prefix: &str| {
        [
            Rule::fixed_window(format!("{prefix}fw"), quota),
            Rule::gcra(format!("{prefix}gcra"), quota),
            Rule::sliding_log(format!("{prefix}log"), quota),
            Rule::sliding_window(format!("{prefix}sw"), quota, 6),
            Rule::token_bucket(format!("{prefix}tb"), quota),
        ]
    };
    let mut policies: Vec<Policy> = rules("")
        .into_iter()
        .map(|rule| Policy::try_from(rule).unwrap())
        .collect();
    policies.push(Policy::new(rules("all-")).unwrap());
    policies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_counts_exactly_with_keys_on_every_primary_and_many_instances() {
    let cluster = RedisCluster::start();
    let clock = ManualClock::new(T0);
    let instances: Vec<RedisStore> = (0..4).map(|_| store(&cluster, &clock)).collect();
    let keys: Vec<String> = (0..60).map(|i| format!("client-{i}")).collect();
    // The keys' slots fall on every primary.
    let primaries: HashSet<usize> = keys
        .iter()
        .map(|key| cluster.primary_for(&format!("{{{key}}}")))
        .collect();
    assert_eq!(primaries.len(), 3, "keys on every primary");
    for key in &keys {
        assert_eq!(cluster.keyslot(&format!("{{{key}}}")), slot(key), "{key}");
    }
    for policy in policies() {
        let tasks: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(index, key)| {
                let (policy, key) = (policy.clone(), Key::from(key.as_str()));
                let instances = instances.clone();
                tokio::spawn(async move {
                    let mut admitted = 0;
                    for attempt in 0..8 {
                        let store = &instances[(index + attempt) % instances.len()];
                        if store.check(&key, &policy, 1).await.unwrap().is_allowed() {
                            admitted += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        for (task, key) in tasks.into_iter().zip(&keys) {
            assert_eq!(task.await.unwrap(), 5, "{key} under {policy:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_permits_and_their_renewals_work_on_every_primary() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls()).build().unwrap();
    let ttl = PermitTtl::new(Duration::from_secs(30));
    let (mut held, mut released) = (Vec::new(), Vec::new());
    for client in 0..30 {
        let slot = Slot::new("ws", format!("user-{client}")).unwrap();
        let mut admitted = Vec::new();
        for _ in 0..3 {
            let permit = PermitId::next();
            if store
                .acquire(&slot, permit, 2, ttl)
                .await
                .unwrap()
                .is_admitted()
            {
                admitted.push(permit);
            }
        }
        assert_eq!(admitted.len(), 2, "user-{client}");
        assert!(store.release(&slot, admitted[0]).await.unwrap());
        released.push(Renewal {
            slot: slot.clone(),
            permit: admitted[0],
            ttl: ttl.duration(),
        });
        held.push(Renewal {
            slot,
            permit: admitted[1],
            ttl: ttl.duration(),
        });
    }
    // One batch of renewals over keys on every primary: the calls are made per slot key, so each
    // goes to its own primary; the held permits are renewed, the released ones found gone.
    let mut renewals = held.clone();
    renewals.extend(released.iter().cloned());
    let gone: HashSet<PermitId> = store.renew(&renewals).await.unwrap().into_iter().collect();
    let expected: HashSet<PermitId> = released.iter().map(|renewal| renewal.permit).collect();
    assert_eq!(gone, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_leases_and_the_denial_cache_work_on_a_cluster() {
    let cluster = RedisCluster::start();
    let clock = ManualClock::new(T0);
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(1_000))).unwrap();
    let instances: Vec<RedisStore> = (0..3)
        .map(|_| {
            RedisStore::cluster(cluster.urls())
                .clock(clock.clone())
                .quota_leases(QuotaLeases::default())
                .build()
                .unwrap()
        })
        .collect();
    let mut admitted = 0;
    for i in 0..1_500 {
        let store = &instances[i % 3];
        if store
            .check(&Key::from("hot"), &policy, 1)
            .await
            .unwrap()
            .is_allowed()
        {
            admitted += 1;
        }
    }
    assert!(admitted <= 1_000, "{admitted} admitted");
    assert!(admitted >= 1_000 - 3 * 100, "only {admitted} admitted");
    for store in &instances {
        store.return_leases().await.unwrap();
    }
    let exact = store(&cluster, &clock);
    let used = exact
        .check(&Key::from("hot"), &policy, 0)
        .await
        .unwrap()
        .used();
    assert_eq!(used, admitted);
}

/// A router limited per `x-client` on the cluster, failing as told, with a 100 ms deadline.
fn app(cluster: &RedisCluster, failure: FailureMode) -> Router {
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(1_000_000)))
        .key(HeaderKey::new("x-client"))
        .store(RedisStore::cluster(cluster.urls()).build().unwrap())
        .failure_mode(failure)
        .deadline(DEADLINE)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

/// Statuses seen while requests run, and the slowest request.
#[derive(Default)]
struct Observed {
    ok: AtomicU64,
    unavailable: AtomicU64,
    other: AtomicU64,
    slowest_us: AtomicU64,
}

/// Sends requests for `client` until `stop`, recording what came back.
async fn drive(app: Router, client: String, stop: Arc<AtomicBool>, seen: Arc<Observed>) {
    while !stop.load(Ordering::Relaxed) {
        let (response, took) = timed_get(&app, "/", PEER, &[("x-client", &client)]).await;
        let counter = match response.status() {
            StatusCode::OK => &seen.ok,
            StatusCode::SERVICE_UNAVAILABLE => &seen.unavailable,
            _ => &seen.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        seen.slowest_us
            .fetch_max(took.as_micros() as u64, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_load_costs_no_request_its_deadline_and_limits_come_back() {
    let mut cluster = RedisCluster::start();
    let client = "victim";
    for failure in [FailureMode::Open, FailureMode::Closed] {
        let app = app(&cluster, failure);
        let (stop, seen) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(Observed::default()),
        );
        let driver = tokio::spawn(drive(
            app.clone(),
            client.to_owned(),
            stop.clone(),
            seen.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let killed = cluster.primary_for(&format!("{{{client}}}"));
        cluster.kill(killed);
        // Its replica takes over after the node timeout (1 s) and an election.
        let started = Instant::now();
        let recovered = loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if cluster.primaries().len() == 3 && seen_recovery(&app, client).await {
                break started.elapsed();
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "limits did not come back within 30 s of the failover"
            );
        };
        stop.store(true, Ordering::Relaxed);
        driver.await.unwrap();
        let slowest = Duration::from_micros(seen.slowest_us.load(Ordering::Relaxed));
        assert!(
            slowest <= DEADLINE + SLACK,
            "{failure:?}: a request took {slowest:?}, past the {DEADLINE:?} deadline"
        );
        assert_eq!(seen.other.load(Ordering::Relaxed), 0, "{failure:?}");
        match failure {
            FailureMode::Open => assert_eq!(
                seen.unavailable.load(Ordering::Relaxed),
                0,
                "fail open answers no 5xx"
            ),
            _ => assert!(
                seen.unavailable.load(Ordering::Relaxed) > 0,
                "fail closed answers 503 while the slot has no primary"
            ),
        }
        eprintln!("{failure:?}: limits exact again {recovered:?} after the kill");
        // The killed node rejoins as a replica; the next round kills the new primary.
        cluster.restart(killed);
        cluster.wait_until_ready(Duration::from_secs(30));
    }
}

/// Whether a fresh client in `client`'s slot is limited exactly again: its decisions come from
/// Redis (a `Rate-Limiting-Total-Requests` that counts up).
async fn seen_recovery(app: &Router, client: &str) -> bool {
    let probe = same_slot(client);
    for expected in 1..=3 {
        let (response, _) = timed_get(app, "/", PEER, &[("x-client", &probe)]).await;
        let counted = response
            .headers()
            .get("rate-limiting-total-requests")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value == expected.to_string());
        if !counted {
            return false;
        }
    }
    true
}

/// A client key never used before whose slot is `client`'s.
fn same_slot(client: &str) -> String {
    let target = slot(client);
    loop {
        let candidate = format!("probe-{}", fastrand::u64(..));
        if slot(&candidate) == target {
            return candidate;
        }
    }
}

#[test]
fn the_slot_function_agrees_with_redis() {
    // The Redis Cluster specification's check value of CRC16/XMODEM; the others agree with the
    // running cluster in the tests below (`primary_for` asks it with `CLUSTER KEYSLOT`).
    assert_eq!(slot("123456789"), 0x31C3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_migrated_under_load_lose_no_decision() {
    // A call is bounded here as the layer's deadline bounds it in a service: a call the cluster
    // client has not answered by then is given up on (it may yet be counted, or not).
    const BOUND: Duration = Duration::from_secs(5);
    let cluster = RedisCluster::start();
    let clock = ManualClock::new(T0);
    let store = store(&cluster, &clock);
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(100_000))).unwrap();
    let from = cluster.primaries()[0];
    let to = cluster.primaries()[1];
    // Keys on the primary whose slots move.
    let keys: Vec<String> = (0..2_000)
        .map(|i| format!("client-{i}"))
        .filter(|key| cluster.primary_for(&format!("{{{key}}}")) == from)
        .take(40)
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = keys
        .iter()
        .map(|key| {
            let (store, policy, stop) = (store.clone(), policy.clone(), stop.clone());
            let key = Key::from(key.as_str());
            tokio::spawn(async move {
                let (mut admitted, mut given_up) = (0_u64, 0_u64);
                while !stop.load(Ordering::Relaxed) {
                    match tokio::time::timeout(BOUND, store.check(&key, &policy, 1)).await {
                        Ok(decision) => {
                            assert!(
                                decision.as_ref().is_ok_and(|d| d.is_allowed()),
                                "{decision:?}"
                            );
                            admitted += 1;
                        }
                        Err(_) => given_up += 1,
                    }
                }
                (admitted, given_up)
            })
        })
        .collect();
    let before = cluster.slot_count(from);
    let reshard = {
        let cluster = &cluster;
        async move {
            tokio::task::block_in_place(|| cluster.reshard(from, to, 4_000));
        }
    };
    reshard.await;
    assert!(cluster.slot_count(from) <= before - 4_000, "slots moved");
    stop.store(true, Ordering::Relaxed);
    for (task, key) in tasks.into_iter().zip(&keys) {
        let (admitted, given_up) = tokio::time::timeout(2 * BOUND, task)
            .await
            .unwrap_or_else(|_| panic!("{key}: its task did not stop"))
            .unwrap();
        assert!(admitted > 0, "{key}: no decision through the resharding");
        // The store answers every key again once the slots have moved.
        let mut used = None;
        for _ in 0..5 {
            let check = store.check(&Key::from(key.as_str()), &policy, 0);
            if let Ok(decision) = tokio::time::timeout(BOUND, check).await {
                used = Some(decision.unwrap().used());
                break;
            }
        }
        let used = used.unwrap_or_else(|| panic!("{key}: no answer after the resharding"));
        // Every admitted decision was counted once, wherever its slot lives now; a call given up
        // on may have been counted too.
        assert!(
            (admitted..=admitted + given_up).contains(&used),
            "{key}: {used} counted, {admitted} admitted, {given_up} given up on"
        );
    }
}
