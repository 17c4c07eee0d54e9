//! The ledger's Redis killed and failed over (Sentinel promotes its replica, which holds every
//! take that counted), and a region's Redis restarted empty: never above the quota, and the
//! regions admit again after.

use std::time::Duration;

use tower_redis_ratelimit::RedisStore;
use tower_redis_ratelimit::store::region::Ledger;

use super::world::{QUOTA, Setup, World};
use crate::support::RedisServer;
use crate::support::sentinel::{MASTER, RedisSentinels};

const Q: u64 = QUOTA as u64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_killed_and_failed_over_loses_no_take() {
    let mut sentinels = RedisSentinels::start();
    let urls = sentinels.urls();
    let ledger = || {
        Ledger::new(
            RedisStore::sentinel(&urls, MASTER)
                .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
                .build()
                .expect("the ledger's store"),
        )
        // A take counts once the replica holds it: the promoted replica cannot grant it again.
        .replicas(1, Duration::from_millis(200))
    };
    let primary = std::net::SocketAddr::from(([127, 0, 0, 1], sentinels.primary_port()));
    // The regions reach the sentinels and the primary they name directly: this scenario is
    // about the ledger's failover, not the links.
    let world = World::start_with(Setup::default(), ledger(), primary, |_| ledger()).await;
    // The promotion takes about 2 s, the old primary's return as a replica about 5 s more:
    // until then no take counts, and the regions spend what they hold, then refuse.
    let drive = world.drive(11.0, |region, _| if region == 2 { 0.0 } else { Q as f64 });
    let kill = async {
        world.sleep_until(1.5).await;
        // Killed: the replica is promoted, and holds every take that counted. The old primary
        // comes back empty as its replica, so that takes can count again. On a thread of its
        // own: the drivers go on meanwhile.
        tokio::task::spawn_blocking(move || {
            sentinels.kill_primary();
            sentinels.revive();
            sentinels
        })
        .await
        .expect("the failover")
    };
    let (_, _sentinels) = tokio::join!(drive, kill);
    let windows = world.assert_at_most(Q);
    let last = windows[10];
    assert!(
        last[0] + last[1] >= Q * 8 / 10,
        "after the failover the regions admit again: {windows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_whose_redis_restarts_empty_takes_allotments_again() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::default(), ledger.addr()).await;
    let drive = world.drive(5.0, |_, _| Q as f64);
    let restart = async {
        world.sleep_until(1.5).await;
        // What region 0 held and spent of the window is lost with its Redis: the ledger still
        // counts it as the region's, so nothing is granted twice.
        tokio::task::block_in_place(|| world.sites[0].redis.lock().unwrap().restart());
    };
    tokio::join!(drive, restart);
    let windows = world.assert_at_most(Q);
    for window in &windows[3..5] {
        assert!(window[0] >= Q / 10, "{windows:?}");
        assert!(window.iter().sum::<u64>() >= Q * 9 / 10, "{windows:?}");
    }
}

/// A region's Redis killed at 70 % of a window and back 0.5 s later, with demand at twice the
/// quota, through layers of the default failure mode (open): a global policy fails closed
/// while its region's Redis cannot answer, so no window admits more than the quota worldwide.
/// (Failing open let 342–344 through in a window of 300.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_whose_redis_is_killed_mid_window_never_admits_past_the_quota() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::default(), ledger.addr()).await;
    let drive = world.drive(4.0, |_, _| 2.0 * Q as f64 / 3.0);
    let kill = async {
        world.sleep_until(1.7).await;
        tokio::task::block_in_place(|| world.sites[1].redis.lock().unwrap().kill());
        world.sleep_until(2.2).await;
        tokio::task::block_in_place(|| world.sites[1].redis.lock().unwrap().restart());
    };
    tokio::join!(drive, kill);
    let windows = world.assert_at_most(Q);
    // The other regions go on admitting meanwhile, and the region comes back.
    assert!(windows[1][0] + windows[1][2] >= Q / 3, "{windows:?}");
    assert!(windows[3][1] > 0, "{windows:?}");
}

/// A ledger not declared is what every global request is told, at a window's edge too (where
/// nothing is spent, and a refusal said "wait" with 429 while the rest of the window said 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_not_declared_is_said_at_a_window_s_edge_too() {
    use tower_redis_ratelimit::clock::ManualClock;
    use tower_redis_ratelimit::key::Key;
    use tower_redis_ratelimit::store::region::RegionStore;
    use tower_redis_ratelimit::{Policy, Quota, Rule, Store};

    let (ledger, region) = (RedisServer::start(), RedisServer::start());
    // Windows of a second, a skew of 2 ms: the last 2 ms of a window are its edge.
    const SECOND: u64 = 1_000_000;
    let start = 1_700_000_000 * SECOND;
    let clock = ManualClock::new(start + SECOND / 2);
    let store = RegionStore::builder(
        "eu-west",
        RedisStore::open(&region.url()).unwrap(),
        Ledger::new(RedisStore::open(&ledger.url()).unwrap()),
    )
    .max_skew(Duration::from_millis(2))
    .sync_every(Duration::from_millis(20))
    .clock(clock.clone())
    .build()
    .unwrap();
    let policy = Policy::global(Rule::fixed_window(
        "api",
        Quota::new(100, Duration::from_secs(1)),
    ))
    .unwrap();
    let key = Key::from("customer-7");
    // The first request starts the mover, which finds the ledger not declared.
    let _ = store.check(&key, &policy, 1).await;
    crate::support::eventually(
        Duration::from_secs(5),
        "the ledger known not declared",
        || async { store.unready().is_some() },
    )
    .await;
    for at in [
        start + SECOND / 2,
        start + SECOND - 1_000,
        start + SECOND + 1_000,
    ] {
        clock.set(at);
        let said = store.check(&key, &policy, 1).await.unwrap_err();
        assert!(
            said.to_string().contains("ledger not declared"),
            "at {at}: {said}"
        );
    }
}
