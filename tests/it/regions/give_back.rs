//! Under a sliding window (and a bucket), a window's units still count on the ledger once it
//! has ended: a sliding window's grants bear on the windows after it. So the leader gives back
//! what its region did not spend of a window once it ends: the region's holding of an ended
//! window comes down to what it spent, and so does the ledger's record of it.

use std::time::Duration;

use tower_redis_ratelimit::store::region::Ledger;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule};

use super::world::{Setup, World};
use crate::support::RedisServer;

/// 400 per 4 s in four sub-intervals: windows of a second. Region 0 asks 60 a second, well
/// within them, so it always holds a margin of units it has not spent yet, up to the end of
/// each window; the drive stops at the end of window 2, which is checked 0.7 s later
/// (the region keeps a window's counts for a period after it, the ledger for four).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unspent_units_of_an_ended_window_go_back_to_the_ledger() {
    let period = Duration::from_secs(4);
    let setup = Setup {
        policy: Policy::global(Rule::sliding_window("sliding", Quota::new(400, period), 4))
            .unwrap(),
        fence: period,
        ..Setup::default()
    };
    let ledger = RedisServer::start();
    let world = World::start(setup, ledger.addr()).await;
    world
        .drive(3.0, |region, _| if region == 0 { 60.0 } else { 0.0 })
        .await;
    world.sleep_until(3.7).await;

    let index = world.t0_us / world.period_us + 2;
    let (held, spent) = {
        let region = world.sites[0].redis.lock().unwrap();
        let suffix = format!(":{index}");
        let key = region
            .keys()
            .into_iter()
            .find(|key| key.contains(":region:") && key.ends_with(&suffix))
            .unwrap_or_else(|| panic!("no hash of window {index}: {:?}", region.keys()));
        let counts: Vec<u64> = region
            .cli(&["HMGET", &key, "h", "s"])
            .lines()
            .map(|line| line.parse().unwrap())
            .collect();
        (counts[0], counts[1])
    };
    let direct = Ledger::new(RedisStore::open(&ledger.url()).unwrap());
    let on_ledger = direct
        .holdings(None)
        .await
        .unwrap()
        .into_iter()
        .find(|holding| holding.window == index)
        .and_then(|holding| {
            let region = holding
                .regions
                .iter()
                .find(|held| held.region == "region-0");
            region.map(|held| held.holds)
        })
        .expect("the ledger's record of window 2");
    eprintln!(
        "window 2: region 0 holds {held}, spent {spent}; the ledger says it holds {on_ledger}"
    );
    // About 60 asked in the window, all admitted.
    assert!(spent >= 50, "spent {spent}");
    assert_eq!(held, spent, "the region kept units of an ended window");
    assert_eq!(
        on_ledger, spent,
        "the ledger was not credited what went unspent"
    );
}
