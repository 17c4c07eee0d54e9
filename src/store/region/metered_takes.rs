//! The ledger's meters (`meter.rs`, `lua/ledger.lua`), tested through takes and credits on a
//! real Redis.

use std::time::Duration;

use testkit::RedisServer;

use super::global_key::GlobalKey;
use super::ledger::Ledger;
use super::meter::Meter;
use super::window::Window;
use crate::clock::{Clock, SystemClock};
use crate::key::Key;
use crate::policy::{Policy, Rule};
use crate::quota::Quota;
use crate::store::RedisStore;
use crate::store::redis::wrapped::{StorageKey, names};

fn key(rule: Rule) -> GlobalKey {
    let policy = Policy::global(rule).unwrap();
    GlobalKey {
        client: StorageKey::new(&Key::from("customer")),
        states: names(&policy),
        policy,
    }
}

/// A declared ledger, the time, and a window of `key` well past its fence.
async fn ledger(redis: &RedisServer, key: &GlobalKey) -> (Ledger, u64, Window) {
    declared(RedisStore::open(&redis.url()).unwrap(), key).await
}

/// The ledger in `store`, declared, the time, and a window of `key` well past its fence.
async fn declared(store: RedisStore, key: &GlobalKey) -> (Ledger, u64, Window) {
    let ledger = Ledger::new(store);
    ledger.declare_new(Duration::from_millis(5)).await.unwrap();
    let now = SystemClock::new().now_micros();
    let mut window = Window::at(now, key.period_us());
    window.index += 20;
    (ledger, now, window)
}

/// Units granted to region "eu" by a take of `want` of `window` (reporting a demand of as
/// many), named `id`.
async fn take(
    ledger: &Ledger,
    key: &GlobalKey,
    now: u64,
    window: Window,
    id: &str,
    want: u64,
) -> u64 {
    let taken = ledger
        .take(key, window, "eu", id, want, want, now)
        .await
        .unwrap();
    assert!(!taken.fenced && taken.counted);
    taken.units
}

fn at(window: Window, ahead: i64) -> Window {
    Window {
        index: window.index.checked_add_signed(ahead).unwrap(),
        ..window
    }
}

/// 100 per 4 s in 4 sub-intervals: what any 4 consecutive windows are granted stays within
/// 100, whichever window is taken first, and a credit frees its units for every period that
/// holds its window.
#[tokio::test]
async fn a_sliding_window_grants_at_most_its_limit_in_any_period_of_windows() {
    let redis = RedisServer::start();
    let key = key(Rule::sliding_window(
        "api",
        Quota::new(100, Duration::from_secs(4)),
        4,
    ));
    assert_eq!(key.meter(), Meter::Sliding { windows: 4 });
    assert_eq!(key.period_us(), 1_000_000);
    let (ledger, now, window) = ledger(&redis, &key).await;
    let take = |window, id, want| take(&ledger, &key, now, window, id, want);
    assert_eq!(take(window, "m1", 60).await, 60);
    assert_eq!(take(at(window, 1), "m2", 60).await, 40);
    assert_eq!(take(at(window, 2), "m3", 60).await, 0);
    // A window before them shares their periods: nothing left there either.
    assert_eq!(take(at(window, -1), "m4", 60).await, 0);
    // 20 unspent units of the first window credited back: 20 for a window beside it.
    ledger
        .credit(&key, window, "eu", "c1", 20, now)
        .await
        .unwrap();
    assert_eq!(take(at(window, 2), "m5", 60).await, 20);
    // Four windows on, the first has slid out of every period holding it: 100 less the 60
    // granted of the three windows before.
    assert_eq!(take(at(window, 4), "m6", 80).await, 40);
}

/// 100 per 10 s with a burst of 20: 10 windows of 1 s, a bucket of 20 refilled 10 a window.
#[tokio::test]
async fn a_bucket_grants_its_burst_then_its_rate_a_window() {
    let redis = RedisServer::start();
    let key = key(Rule::gcra(
        "api",
        Quota::new(100, Duration::from_secs(10)).with_burst(20),
    ));
    assert_eq!(
        key.meter(),
        Meter::Bucket {
            windows: 10,
            burst: 20
        }
    );
    assert_eq!((key.period_us(), key.quota()), (1_000_000, 20));
    let (ledger, now, window) = ledger(&redis, &key).await;
    let take = |window, id, want| take(&ledger, &key, now, window, id, want);
    // Full at first: the burst; the next window refills 10.
    assert_eq!(take(window, "m1", 50).await, 20);
    assert_eq!(take(at(window, 1), "m2", 50).await, 10);
    // A take of the window before, once the next was metered, comes out of the next's.
    assert_eq!(take(window, "m3", 50).await, 0);
    // Two windows on, two refills (up to the burst).
    assert_eq!(take(at(window, 3), "m4", 50).await, 20);
    // A window more than one behind the bucket gets nothing.
    assert_eq!(take(at(window, 1), "m5", 50).await, 0);
    // Unspent units credited back go into the bucket.
    ledger
        .credit(&key, at(window, 3), "eu", "c1", 5, now)
        .await
        .unwrap();
    assert_eq!(take(at(window, 3), "m6", 50).await, 5);
    // Keys of a rule allotted in windows name the window count.
    assert!(
        redis
            .keys()
            .iter()
            .any(|name| name.ends_with(":w10:{customer}:meter")),
        "{:?}",
        redis.keys()
    );
}

/// On a Redis Cluster, a take of either meter touches one hash slot: the windows a sliding
/// window reads and a bucket's meter share the client key's hash tag.
#[cfg(feature = "cluster")]
#[tokio::test]
async fn the_meters_run_on_a_cluster_ledger() {
    let cluster = testkit::cluster::RedisCluster::start();
    let store = || RedisStore::cluster(cluster.urls()).build().unwrap();
    let sliding = key(Rule::sliding_window(
        "api",
        Quota::new(100, Duration::from_secs(4)),
        4,
    ));
    let (ledger, now, window) = declared(store(), &sliding).await;
    assert_eq!(take(&ledger, &sliding, now, window, "m1", 60).await, 60);
    assert_eq!(
        take(&ledger, &sliding, now, at(window, 1), "m2", 60).await,
        40
    );
    let bucket = key(Rule::token_bucket(
        "api",
        Quota::new(100, Duration::from_secs(10)).with_burst(20),
    ));
    assert_eq!(take(&ledger, &bucket, now, window, "m3", 50).await, 20);
    assert_eq!(
        take(&ledger, &bucket, now, at(window, 1), "m4", 50).await,
        10
    );
}
