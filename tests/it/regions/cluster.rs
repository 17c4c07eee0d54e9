//! A ledger on a Redis Cluster of three primaries: declared in every hash slot, two regions
//! taking for many keys, never above any key's quota, the keys' windows spread over the
//! primaries; a primary killed and failed over loses no take; a primary that loses its slots'
//! declaration says so, and is declared again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tower_redis_ratelimit::clock::{Clock, SystemClock};
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::region::{Declared, Ledger, RegionStore};
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

use super::world::MAX_SKEW;
use crate::support::RedisServer;
use crate::support::cluster::RedisCluster;

/// Each key's quota: `Q` units per one-second window, worldwide.
const Q: u32 = 20;
const PERIOD_US: u64 = 1_000_000;
/// Keys enough to land on every primary.
const KEYS: usize = 24;

fn ledger(cluster: &RedisCluster) -> Ledger {
    Ledger::new(
        RedisStore::cluster(cluster.urls())
            .build()
            .expect("the ledger's store"),
    )
}

/// The ledger's keys on the node at `index` (`KEYS`, as an operator would list them).
fn keys_on(cluster: &RedisCluster, index: usize) -> Vec<String> {
    cluster
        .node(index)
        .cli(&["KEYS", "ratelimit:ledger:*"])
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Two regions, each its Redis and one instance, spending `ledger`, asked `keys` keys.
struct Regions {
    stores: Vec<RegionStore>,
    _redis: Vec<RedisServer>,
    policy: Policy,
    keys: Vec<Key>,
    /// The first window the ledger grants (µs): the ledger was declared at `epoch`.
    t0: u64,
}

/// (window, key) → admitted, per region.
type Admitted = BTreeMap<(u64, usize), [u64; 2]>;

impl Regions {
    fn start(ledger: &Ledger, epoch: u64, keys: usize) -> Self {
        let policy = Policy::global(Rule::fixed_window(
            "api",
            Quota::new(Q, Duration::from_secs(1)),
        ))
        .unwrap();
        let redis: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
        let stores = redis
            .iter()
            .enumerate()
            .map(|(index, redis)| {
                RegionStore::builder(
                    format!("region-{index}"),
                    RedisStore::open(&redis.url()).unwrap(),
                    ledger.clone(),
                )
                .max_skew(MAX_SKEW)
                .sync_every(Duration::from_millis(50))
                .build()
                .unwrap()
            })
            .collect();
        let fence = epoch + PERIOD_US + 2 * MAX_SKEW.as_micros() as u64;
        Self {
            stores,
            _redis: redis,
            policy,
            keys: (0..keys)
                .map(|i| Key::from(format!("customer-{i}")))
                .collect(),
            t0: (fence / PERIOD_US + 1) * PERIOD_US,
        }
    }

    /// Asks every key in each region at the quota's rate (twice the quota worldwide), from
    /// half a window before `t0` until `end` (µs); what was admitted.
    async fn drive(&self, end: u64) -> Admitted {
        let clock = SystemClock::new();
        let mut admitted = Admitted::new();
        let tick = PERIOD_US / u64::from(Q);
        let mut at = self.t0 - PERIOD_US / 2;
        while at < end {
            let now = clock.now_micros();
            if now < at {
                tokio::time::sleep(Duration::from_micros(at - now)).await;
            }
            let policy = &self.policy;
            let checks = self.stores.iter().enumerate().flat_map(|(region, store)| {
                self.keys
                    .iter()
                    .enumerate()
                    .map(move |(index, key)| async move {
                        let at = SystemClock::new().now_micros();
                        let decision = store.check(key, policy, 1).await;
                        // The window the store spent: its end is `full_after` from the store's
                        // reading of the clock, a moment after `at` (on a loaded machine, maybe
                        // past a window's edge: counted by `at`, an admission could land in
                        // the window before the one it spent).
                        let window = decision.ok().filter(|decision| decision.is_allowed()).map(
                            |decision| {
                                let end = at + decision.full_after().as_micros() as u64;
                                (end + PERIOD_US / 2) / PERIOD_US - 1
                            },
                        );
                        (region, index, window)
                    })
            });
            for (region, index, window) in futures_util::future::join_all(checks).await {
                if let Some(window) = window {
                    admitted.entry((window, index)).or_default()[region] += 1;
                }
            }
            at += tick;
        }
        admitted
    }
}

/// Never above a key's quota in any window, worldwide.
fn assert_within_quota(admitted: &Admitted) {
    for (&(window, index), counts) in admitted {
        assert!(
            counts.iter().sum::<u64>() <= u64::from(Q),
            "window {window}, key {index}: {counts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_on_a_cluster_holds_every_keys_quota_and_spreads_over_the_primaries() {
    let cluster = RedisCluster::start();
    let ledger = ledger(&cluster);
    assert_eq!(ledger.birth().await.unwrap(), None);
    let started = std::time::Instant::now();
    let epoch = ledger.declare_new(MAX_SKEW).await.unwrap();
    let declaring = started.elapsed();
    let started = std::time::Instant::now();
    let birth = ledger.birth().await.unwrap().expect("declared");
    eprintln!("declared in {declaring:?}, read in {:?}", started.elapsed());
    assert_eq!(birth.max_skew, MAX_SKEW);
    assert!(birth.epoch >= epoch, "{birth:?} {epoch}");
    // One birth per slot: each primary holds as many as it serves slots.
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    for &primary in &primaries {
        eprintln!("births on a primary: {}", cluster.slot_count(primary));
        assert_eq!(
            keys_on(&cluster, primary).len(),
            cluster.slot_count(primary) as usize
        );
    }

    let regions = Regions::start(&ledger, epoch, KEYS);
    let end = regions.t0 + 4 * PERIOD_US;
    let admitted = regions.drive(end).await;
    assert_within_quota(&admitted);
    let t0 = regions.t0;
    // The quota is used: every key in the full windows gets most of it.
    let used: u64 = admitted
        .iter()
        .filter(|((window, _), _)| *window > t0 / PERIOD_US && *window < end / PERIOD_US)
        .map(|(_, counts)| counts.iter().sum::<u64>())
        .sum();
    let offered = u64::from(Q) * KEYS as u64 * (end / PERIOD_US - t0 / PERIOD_US - 1);
    eprintln!("a cluster ledger: {used} admitted of {offered} quota in the full windows");
    assert!(used * 10 >= offered * 8, "{used} of {offered}");

    // `ledger show` reads every primary; first, while the last windows are kept (a period
    // after their end): the checks below ask the cluster a call per key.
    let shown: BTreeSet<String> = ledger
        .holdings(None)
        .await
        .unwrap()
        .into_iter()
        .map(|holding| holding.key)
        .collect();
    assert_eq!(shown.len(), KEYS, "{shown:?}");

    // The keys' windows spread over the three primaries, each key's on its slot's primary
    // (every primary's keys read first, then a call per key).
    let mut spread = Vec::new();
    let on: Vec<Vec<String>> = primaries
        .iter()
        .map(|&primary| keys_on(&cluster, primary))
        .collect();
    for (&primary, keys) in primaries.iter().zip(on) {
        let windows: BTreeSet<String> = keys
            .into_iter()
            .filter(|name| !name.contains(":birth:") && !name.ends_with(":moves"))
            .filter_map(|name| Some(name[name.find('{')? + 1..name.find('}')?].to_owned()))
            .collect();
        for client in &windows {
            assert_eq!(cluster.primary_for(&format!("{{{client}}}")), primary);
        }
        spread.push(windows.len());
    }
    eprintln!("keys per primary: {spread:?}");
    assert_eq!(spread.iter().sum::<usize>(), KEYS, "{spread:?}");
    assert!(spread.iter().all(|&keys| keys > 0), "{spread:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_loses_its_declaration_is_named_and_declared_again() {
    let cluster = RedisCluster::start();
    let ledger = ledger(&cluster);
    let Declared::Now { epoch } = ledger.declare(MAX_SKEW).await.unwrap() else {
        panic!("a new ledger is declared now");
    };
    assert_eq!(
        ledger.declare(MAX_SKEW).await.unwrap(),
        Declared::Already { epoch }
    );
    // Another max_skew conflicts, and writes nothing.
    let conflict = ledger.declare(Duration::from_millis(50)).await.unwrap_err();
    assert!(
        conflict
            .to_string()
            .contains("declared with max_skew 2000 us"),
        "{conflict}"
    );
    assert_eq!(ledger.birth().await.unwrap().unwrap().max_skew, MAX_SKEW);

    // One primary loses its keys (as if restarted empty): its slots, and only they, are not
    // declared.
    let primary = cluster.primaries()[1];
    cluster.node(primary).cli(&["FLUSHALL"]);
    let error = ledger.birth().await.unwrap_err().to_string();
    let declared = 16_384 - cluster.slot_count(primary);
    assert!(
        error.contains(&format!("declared in {declared} of 16384 hash slots only")),
        "{error}"
    );
    // Another max_skew is refused before any slot is written, the missing ones too.
    let conflict = ledger.declare(Duration::from_millis(50)).await.unwrap_err();
    assert!(
        conflict
            .to_string()
            .contains("declared with max_skew 2000 us"),
        "{conflict}"
    );
    assert_eq!(ledger.birth().await.unwrap_err().to_string(), error);
    // Declared again: the slots without a birth get a new epoch, the others are left.
    let Declared::Now { epoch: again } = ledger.declare(MAX_SKEW).await.unwrap() else {
        panic!("the missing births are written");
    };
    assert!(again > epoch);
    let birth = ledger.birth().await.unwrap().expect("declared");
    assert_eq!((birth.epoch, birth.max_skew), (again, MAX_SKEW));
}

/// A primary of the ledger killed mid-window: its replica takes over, holding the births and
/// every take that counted (a take counts once the replica holds it), so no key goes above its
/// quota; once the old primary is back as the new one's replica, takes count again and the keys
/// of its slots are granted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_of_the_ledger_killed_and_failed_over_loses_no_take() {
    const KEYS: usize = 12;
    let mut cluster = RedisCluster::start();
    let ledger = ledger(&cluster).replicas(1, Duration::from_millis(200));
    let epoch = ledger.declare_new(MAX_SKEW).await.unwrap();
    let regions = Regions::start(&ledger, epoch, KEYS);
    let victim = cluster.primaries()[0];
    let on_victim: Vec<usize> = (0..KEYS)
        .filter(|index| cluster.primary_for(&format!("{{customer-{index}}}")) == victim)
        .collect();
    assert!(!on_victim.is_empty());
    let t0 = regions.t0;
    // The old primary is back as a replica 8 s in on a quiet machine, 10 s in under a full
    // suite's load: the last window, where every key must be granted again, comes well after.
    let end = t0 + 20 * PERIOD_US;
    let kill = async move {
        let at = t0 + 3 * PERIOD_US / 2;
        let now = SystemClock::new().now_micros();
        tokio::time::sleep(Duration::from_micros(at.saturating_sub(now))).await;
        // On a thread of its own: the drivers go on meanwhile.
        tokio::task::spawn_blocking(move || {
            let since_t0 = || (SystemClock::new().now_micros() - t0) as f64 / 1e6;
            cluster.kill(victim);
            cluster.wait_until_ready(Duration::from_secs(30));
            let promoted = since_t0();
            cluster.restart(victim);
            cluster.wait_until_ready(Duration::from_secs(30));
            eprintln!("killed at 1.5 s, replica promoted by {promoted:.1} s, back as its replica by {:.1} s", since_t0());
            cluster
        })
        .await
        .expect("the failover")
    };
    let (admitted, _cluster) = tokio::join!(regions.drive(end), kill);
    assert_within_quota(&admitted);
    let last = end / PERIOD_US - 1;
    let granted: Vec<u64> = (0..KEYS)
        .map(|index| {
            admitted
                .get(&(last, index))
                .map_or(0, |counts| counts.iter().sum())
        })
        .collect();
    let per_window: Vec<u64> = (t0 / PERIOD_US..=last)
        .map(|window| {
            on_victim
                .iter()
                .filter_map(|&index| admitted.get(&(window, index)))
                .map(|counts| counts.iter().sum::<u64>())
                .sum()
        })
        .collect();
    eprintln!("the killed primary's keys, admitted per window: {per_window:?}");
    eprintln!("the last window, per key: {granted:?} (on the killed primary: {on_victim:?})");
    for &index in &on_victim {
        assert!(granted[index] > 0, "key {index}: {granted:?}");
    }
}
