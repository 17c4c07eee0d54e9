//! Demand that spreads from one region to all three, at the default `sync_every`: every
//! region's share of the quota moves within a second, in the window the demand spreads in and
//! in the next one, which the region that led had already taken units of. Four-second windows,
//! so that a window is taken ahead a second before it opens.

use std::time::Duration;

use tower_redis_ratelimit::store::region::Ledger;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule};

use super::world::{Setup, World};
use crate::support::RedisServer;

const Q: u64 = 600;
const PERIOD_S: f64 = 4.0;
/// Region 0, 30 ms from the ledger, leads; the demand spreads to the regions 100 and 150 ms
/// away.
const LEADER: usize = 0;

fn setup() -> Setup {
    Setup {
        policy: Policy::global(Rule::fixed_window(
            "api",
            Quota::new(Q as u32, Duration::from_secs_f64(PERIOD_S)),
        ))
        .expect("a global policy"),
        fence: Duration::from_secs_f64(PERIOD_S),
        window: Duration::from_secs_f64(PERIOD_S),
        sync_every: Duration::from_millis(100),
        ..Setup::default()
    }
}

/// Region 0 alone asks twice the quota a window; from `spread_s`, every region asks `each`
/// times the quota a window, until the end of window 1. The world, once driven; the ledger's
/// holdings every quarter second from the spread are printed.
async fn spread(ledger: &RedisServer, spread_s: f64, each: f64) -> World {
    let world = World::start(setup(), ledger.addr()).await;
    let per_second = |quotas: f64| quotas * Q as f64 / PERIOD_S;
    let drive = world.drive(2.0 * PERIOD_S, |region, t| {
        if t >= spread_s {
            per_second(each)
        } else if region == LEADER {
            per_second(2.0)
        } else {
            0.0
        }
    });
    let direct = Ledger::new(RedisStore::open(&ledger.url()).unwrap());
    let watch = async {
        for quarter in -1..9 {
            let at = spread_s + f64::from(quarter) / 4.0;
            world.sleep_until(at).await;
            for holding in direct.holdings(None).await.unwrap() {
                let regions: Vec<_> = holding
                    .regions
                    .iter()
                    .map(|held| (held.region.as_str(), held.holds, held.demand))
                    .collect();
                eprintln!(
                    "spread {:+.2} s: window {} free {}; (region, holds, demand) {regions:?}",
                    at - spread_s,
                    holding.window - world.t0_us / world.period_us,
                    holding.free
                );
            }
        }
    };
    ledger.cli(&["CONFIG", "RESETSTAT"]);
    let from = world.now_s();
    tokio::join!(drive, watch);
    let seconds = world.now_s() - from;
    let calls = ledger.script_calls() as f64 / seconds / 3.0;
    eprintln!("spread at {spread_s} s: calls to the ledger, {calls:.1} a second per region");
    world
}

/// Prints what each region asked and admitted per 250 ms from `spread_s`, and checks that the
/// regions the demand spread to admit at least 90 % of what they ask from one second after the
/// spread to `UNTIL` (they stay below their share of a third of the quota meanwhile). Returns,
/// for each of them, the earliest quarter second after the spread from which it admitted 90 %
/// until then.
fn assert_followed_within_a_second(world: &World, spread_s: f64) -> [f64; 2] {
    const SLICE: f64 = 0.25;
    /// Seconds after the spread until which the asks fit in the window's quota. A quarter
    /// second into window 1, region 0 has spent 75 of its 600 (twice the quota a window), so
    /// the three regions' asks (two thirds of the quota a window each, 300 a second in all)
    /// reach the quota 1.75 s after the spread: from then on every ask is refused, and which
    /// region is refused first is a matter of a few units of its share, not of following.
    const UNTIL: f64 = 1.75;
    for i in -1..8 {
        let from = spread_s + f64::from(i) * SLICE;
        eprintln!(
            "spread {:+.2} s: (asked, admitted) per region {:?}",
            from - spread_s,
            world.counted(from, from + SLICE)
        );
    }
    let admitted_from = |region: usize, after: f64| {
        let (asked, admitted) = world.counted(spread_s + after, spread_s + UNTIL)[region];
        admitted * 10 >= asked * 9
    };
    let mut followed = [0.0; 2];
    for (index, region) in [1, 2].into_iter().enumerate() {
        followed[index] = (0..7)
            .map(|i| f64::from(i) * SLICE)
            .find(|&after| admitted_from(region, after))
            .unwrap_or(UNTIL);
        eprintln!(
            "region {region}: 90 % of its asks admitted from {:.2} s after the spread",
            followed[index]
        );
        assert!(
            admitted_from(region, 1.0),
            "region {region} admitted less than 90 % of its asks from 1 s after the spread: {:?}",
            world.counted(spread_s + 1.0, spread_s + UNTIL)
        );
    }
    followed
}

/// Every region admitted at least `percent` % of its share (a third of the quota) in
/// `window`.
fn assert_shared(windows: &[[u64; 3]], window: usize, percent: u64) {
    for region in 0..3 {
        assert!(
            windows[window][region] * 100 >= Q / 3 * percent,
            "window {window}: region {region} admitted {} of a share of {}: {windows:?}",
            windows[window][region],
            Q / 3
        );
    }
}

/// The demand spreads a quarter second into window 1, whose units region 0 took in window 0:
/// twice the quota worldwide, two thirds of it in each region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_spreading_mid_window_moves_the_shares_within_a_second() {
    let ledger = RedisServer::start();
    let spread_s = PERIOD_S + 0.25;
    let world = spread(&ledger, spread_s, 2.0 / 3.0).await;
    let windows = world.assert_at_most(Q);
    let followed = assert_followed_within_a_second(&world, spread_s);
    eprintln!(
        "mid-window: followed after {followed:?} s, window 1 admitted {:?}",
        windows[1]
    );
    assert_shared(&windows, 1, 90);
}

/// The demand spreads half a second before window 1 opens, after region 0 took units of it:
/// the units move before it opens, or within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_spreading_after_the_next_window_was_taken_moves_it_within_a_second() {
    let ledger = RedisServer::start();
    let spread_s = PERIOD_S - 0.5;
    let world = spread(&ledger, spread_s, 2.0 / 3.0).await;
    let windows = world.assert_at_most(Q);
    let followed = assert_followed_within_a_second(&world, spread_s);
    eprintln!(
        "window ahead: followed after {followed:?} s, window 1 admitted {:?}",
        windows[1]
    );
    assert_shared(&windows, 1, 90);
}

/// As above, but region 0 goes on asking twice the quota and the others ask as much: its own
/// need never shows a surplus, and it gives back what it holds beyond its share of the next
/// window because the ledger's answer says the others wait for it (before, it kept all of
/// it, and the others admitted nothing in window 1). Every region spends its share within
/// 0.7 s of the window's start, and the shares follow demands read within about a tenth: at
/// least three quarters of each share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_holding_the_next_window_gives_back_what_others_wait_for() {
    let ledger = RedisServer::start();
    let world = spread(&ledger, PERIOD_S - 0.5, 2.0).await;
    let windows = world.assert_at_most(Q);
    eprintln!("twice the quota each: window 1 admitted {:?}", windows[1]);
    assert_shared(&windows, 1, 75);
}
