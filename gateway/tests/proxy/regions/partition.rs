//! A region cut off from the ledger for several windows, then healed: in refuse mode never
//! above the quota; in emergency mode never above the quota and the region's emergency share
//! (docs/regions.md's bound).

use testkit::RedisServer;

use super::world::{Setup, World};

/// Every region asks two thirds of the quota (twice it worldwide); region 2 is cut off from
/// 1.5 s to 4.5 s. The world and its windows, after checking them against the quota and
/// `emergency` units more.
async fn partitioned(
    scenario: &str,
    region: &'static str,
    emergency: u64,
) -> (World, Vec<[u64; 3]>) {
    let ledger = RedisServer::start();
    let world = World::start(Setup {
        region,
        ..Setup::linked(ledger.addr())
    })
    .await;
    let q = world.quota;
    let drive = world.drive(7.0, |_, _| 2.0 * q as f64 / 3.0);
    let cut = async {
        world.sleep_until(1.5).await;
        world.link(2).partition();
        world.sleep_until(4.5).await;
        world.link(2).heal();
    };
    tokio::join!(drive, cut);
    let windows = world.verdict(scenario, q + emergency);
    // Healed, the region's demand is heard again and shares converge.
    let window = windows[6];
    assert!(window[2] >= q / 10, "{windows:?}");
    world.assert_served(6, &[0, 1, 2], q);
    (world, windows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_in_refuse_mode_spends_what_it_holds_then_refuses() {
    let (world, windows) =
        partitioned("a region cut off, refuse", r#"partition = "refuse""#, 0).await;
    // Windows 2 and 3 start while it is cut off: it holds nothing of them, and admits no
    // request sent in them (decided after it was sent; one sent before may arrive late).
    assert_eq!(world.admitted_sent(2.0..4.0, 2), 0, "{windows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_in_emergency_mode_spends_its_share_and_no_more() {
    // floor(0.2 × 100) units a window for the one region cut off.
    let (_, windows) = partitioned(
        "a region cut off, emergency 0.2",
        "partition = { emergency = { fraction = 0.2 } }",
        20,
    )
    .await;
    // It counts itself cut off once the ledger has failed for `partition_after` (twice
    // `move_timeout`, 1 s), the first failure a `move_timeout` after the cut: from about 3 s.
    // Windows 3 and 4 start while it is cut off.
    for window in &windows[3..5] {
        assert!(
            (1..=20).contains(&window[2]),
            "a region cut off spends up to its emergency share, 20: {windows:?}"
        );
    }
}
