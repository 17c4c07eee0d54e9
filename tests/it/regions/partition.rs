//! A region cut off from the ledger for several windows, then healed: in refuse mode never
//! above the quota; in emergency mode never above the quota and the region's emergency share.

use tower_redis_ratelimit::store::region::PartitionMode;

use super::world::{QUOTA, Setup, World};
use crate::support::RedisServer;

const Q: u64 = QUOTA as u64;

/// Every region asks the quota; region 2 is cut off from 1.5 s to 4.5 s.
async fn partitioned(partition: PartitionMode) -> Vec<[u64; 3]> {
    let ledger = RedisServer::start();
    let world = World::start(
        Setup {
            partition,
            ..Setup::default()
        },
        ledger.addr(),
    )
    .await;
    let drive = world.drive(7.0, |_, _| Q as f64);
    let cut = async {
        world.sleep_until(1.5).await;
        world.sites[2].link.partition();
        world.sleep_until(4.5).await;
        world.sites[2].link.heal();
    };
    tokio::join!(drive, cut);
    let bound = Q + (Q as f64 * fraction(partition)).floor() as u64;
    let windows = world.assert_at_most(bound);
    // Healed, the region's demand is heard again and shares converge.
    for window in &windows[6..7] {
        assert!(window[2] >= Q / 10, "{windows:?}");
        assert!(window.iter().sum::<u64>() >= Q * 9 / 10, "{windows:?}");
    }
    windows
}

fn fraction(mode: PartitionMode) -> f64 {
    match mode {
        PartitionMode::Emergency { fraction } => fraction,
        _ => 0.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_in_refuse_mode_spends_what_it_holds_then_refuses() {
    let windows = partitioned(PartitionMode::Refuse).await;
    // Windows 2 and 3 start while it is cut off: it holds nothing of them.
    for window in &windows[2..4] {
        assert_eq!(window[2], 0, "{windows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_in_emergency_mode_spends_its_share_and_no_more() {
    let windows = partitioned(PartitionMode::Emergency { fraction: 0.2 }).await;
    for window in &windows[2..4] {
        assert!(
            (1..=Q / 5).contains(&window[2]),
            "a region cut off spends up to its emergency share, 20: {windows:?}"
        );
    }
}
