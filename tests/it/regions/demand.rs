//! Demand in one region, demand that moves, every region saturated: never above the quota, and
//! the quota follows the demand.

use super::world::{QUOTA, Setup, World};
use crate::support::RedisServer;

const Q: u64 = QUOTA as u64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_in_one_region_gets_the_whole_quota_and_never_more() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::default(), ledger.addr()).await;
    // The region 100 ms from the ledger asks three times the quota.
    world
        .drive(
            4.0,
            |region, _| if region == 1 { 3.0 * Q as f64 } else { 0.0 },
        )
        .await;
    let windows = world.assert_at_most(Q);
    for (index, window) in windows.iter().enumerate().skip(1).take(3) {
        assert_eq!(window[0] + window[2], 0, "{windows:?}");
        assert!(
            window[1] >= Q * 9 / 10,
            "window {index}: the only region with demand admitted {} of {Q}: {windows:?}",
            window[1]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_moving_mid_window_takes_the_quota_with_it() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::default(), ledger.addr()).await;
    // Region 0 asks a little more than the quota, then in the middle of window 2 stops, and
    // region 2 (150 ms from the ledger) asks as much.
    world
        .drive(5.0, |region, t| match region {
            0 if t < 2.5 => 1.2 * Q as f64,
            2 if t >= 2.5 => 1.2 * Q as f64,
            _ => 0.0,
        })
        .await;
    let windows = world.assert_at_most(Q);
    assert!(windows[1][0] >= Q * 9 / 10, "{windows:?}");
    // Region 2's first units come a tick and a round trip (300 ms) after its demand appears,
    // with what region 0 gave up: within 0.6 s.
    let first = world
        .log
        .lock()
        .unwrap()
        .iter()
        .find(|admission| admission.region == 2 && admission.allowed)
        .map(|admission| (admission.at_us - world.t0_us) as f64 / 1e6)
        .expect("region 2 admitted some");
    eprintln!("region 2 first admitted at {first:.3} s (its demand from 2.5 s)");
    assert!(
        (2.5..3.1).contains(&first),
        "region 2 first admitted at {first} s: {windows:?}"
    );
    assert!(windows[2][2] > 0, "{windows:?}");
    for window in &windows[3..5] {
        assert!(window[2] >= Q * 9 / 10, "{windows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_region_saturated_shares_the_quota_and_never_exceeds_it() {
    let ledger = RedisServer::start();
    let world = World::start(Setup::default(), ledger.addr()).await;
    world.drive(4.0, |_, _| 2.0 * Q as f64).await;
    let windows = world.assert_at_most(Q);
    for window in &windows[1..4] {
        let total: u64 = window.iter().sum();
        assert!(total >= Q * 9 / 10, "{windows:?}");
        // Each region's demand is heard: none is starved.
        assert!(window.iter().all(|&each| each >= Q / 10), "{windows:?}");
    }
}
