//! The ledger's Redis killed and failed over (Sentinel promotes its replica, which holds every
//! take that counted), a region's Redis restarted empty, and a region's Redis killed in the
//! middle of a window with demand at twice the quota: never above the quota, and the regions
//! admit again after.

use testkit::RedisServer;
use testkit::sentinel::{MASTER, RedisSentinels};

use super::world::{LedgerAt, Setup, World};
use crate::support::toml_strings;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_killed_and_failed_over_loses_no_take() {
    let mut sentinels = RedisSentinels::start();
    let urls = toml_strings(&sentinels.urls());
    // docs/regions.md's ledger: a Sentinel set, a take counting once the replica holds it (so
    // that the promoted replica cannot grant it again).
    let setup = Setup {
        region: r#"replicas = 1, partition = "refuse""#,
        ..Setup::new(LedgerAt::Direct(format!(
            "sentinels = {urls}, master = \"{MASTER}\""
        )))
    };
    let world = World::start(setup).await;
    let q = world.quota;
    // The promotion takes about 2 s, the old primary's return as a replica about 5 s more:
    // until then no take counts, and the regions spend what they hold, then refuse.
    let rate = |region, _| if region == 2 { 0.0 } else { q as f64 };
    let drive = world.drive(11.0, rate);
    let kill = async {
        world.sleep_until(1.5).await;
        // Killed: the replica is promoted, and holds every take that counted. The old primary
        // comes back empty as its replica, so that takes can count again. On a thread of its
        // own: the drivers go on meanwhile.
        let sentinels = tokio::task::spawn_blocking(move || {
            sentinels.kill_primary();
            sentinels.revive();
            sentinels
        })
        .await
        .expect("the failover");
        (sentinels, world.now_s())
    };
    let (_, (sentinels, revived)) = tokio::join!(drive, kill);
    // On a busy machine the old primary comes back later: the regions are asked two windows
    // more after it did.
    let end = (revived.ceil() + 2.0).max(11.0);
    world.drive(end, rate).await;
    let windows = world.verdict("the ledger failed over (Sentinel)", q);
    eprintln!("the old primary was back as a replica at {revived:.1} s");
    let last = windows.get(end as usize - 1).copied().unwrap_or_default();
    if last[0] + last[1] < q * 8 / 10 {
        // What the ledger's servers say they are, to tell a failover that did not settle.
        let roles: Vec<String> = tokio::task::block_in_place(|| {
            sentinels
                .servers()
                .iter()
                .map(|server| format!("{}: {}", server.port(), server.cli(&["ROLE"])))
                .collect()
        });
        panic!(
            "after the failover the regions admit again: {windows:?}; the sentinels name port \
             {} as primary; roles {roles:?}",
            tokio::task::block_in_place(|| sentinels.primary_port())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_whose_redis_restarts_empty_takes_allotments_again() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::linked(ledger.addr())).await;
    let q = world.quota;
    let drive = world.drive(5.0, |_, _| 2.0 * q as f64 / 3.0);
    let restart = async {
        world.sleep_until(1.5).await;
        // What region 0 held and spent of the window is lost with its Redis: the ledger still
        // counts it as the region's, so nothing is granted twice.
        world.restart_redis(0);
    };
    tokio::join!(drive, restart);
    let windows = world.verdict("a region's Redis restarted empty", q);
    for (index, window) in windows.iter().enumerate().take(5).skip(3) {
        assert!(window[0] >= q / 10, "{windows:?}");
        world.assert_served(index, &[0, 1, 2], q);
    }
}

/// A region's Redis killed at 70 % of a window and back 0.5 s later, with demand at twice the
/// quota, through routes of the default failure mode: a global policy fails closed while its
/// region's Redis cannot answer (503), so no window admits more than the quota worldwide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_whose_redis_is_killed_mid_window_never_admits_past_the_quota() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::linked(ledger.addr())).await;
    let q = world.quota;
    let drive = world.drive(4.0, |_, _| 2.0 * q as f64 / 3.0);
    let kill = async {
        world.sleep_until(1.7).await;
        world.kill_redis(1);
        world.sleep_until(2.2).await;
        world.restart_redis(1);
    };
    tokio::join!(drive, kill);
    let windows = world.verdict("a region's Redis killed mid-window", q);
    // The other regions go on admitting meanwhile, and the region comes back.
    assert!(windows[1][0] + windows[1][2] >= q / 3, "{windows:?}");
    assert!(windows[3][1] > 0, "{windows:?}");
    // While it was down, the region answered 503: a store that cannot answer.
    let refused = world
        .sent
        .lock()
        .unwrap()
        .iter()
        .filter(|sent| sent.region == 1 && sent.status == 503)
        .count();
    assert!(refused > 0, "{windows:?}");
}
