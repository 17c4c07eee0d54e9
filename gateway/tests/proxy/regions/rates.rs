//! Global rules beyond the fixed window, as processes of the binary: a GCRA rule and a sliding
//! window (the library's `tests/it/regions/rates.rs`, shorter), demand at twice their rate
//! moving from one region to another, then spread over all three. From the upstream's log:
//! every run of consecutive windows within the bound docs/regions.md states, and each region
//! that asked admitted.

use testkit::RedisServer;

use super::decided::Span;
use super::world::{GlobalRule, PERIOD_US, Setup, World};

/// Region 0 asks `rate` per second from 0 s to 3 s, then region 2 (the farthest from the
/// ledger) until 6 s, then all three a third each until 9 s.
fn moving(rate: f64) -> impl Fn(usize, f64) -> f64 {
    move |region, t| match (region, t) {
        (0, t) if (0.0..3.0).contains(&t) => rate,
        (2, t) if (3.0..6.0).contains(&t) => rate,
        (_, t) if (6.0..9.0).contains(&t) => rate / 3.0,
        _ => 0.0,
    }
}

/// Runs a world whose global policy holds `rule`, `rate` a window (its utilisation's base),
/// driven at twice that as [`moving`] says; checks from the upstream's log (tally's checks of
/// every window against `bound(1)`, then every run of 1 to `longest` consecutive windows
/// against `bound(m)`) and that each region admitted while it asked.
async fn run(
    scenario: &str,
    rule: GlobalRule,
    rate: u64,
    longest: u64,
    bound: impl Fn(u64) -> u64,
) {
    let ledger = RedisServer::start();
    let world = World::start(Setup {
        quota: rate,
        rule,
        ..Setup::linked(ledger.addr())
    })
    .await;
    world.drive(9.0, moving(2.0 * rate as f64)).await;
    world.verdict(scenario, bound(1));
    assert_runs(&world, longest, bound);
    let admitted = |span, region| world.admitted_sent(span, region);
    assert!(admitted(0.0..3.0, 0) > 0, "{:?}", world.admitted());
    assert!(admitted(3.0..6.0, 2) > 0, "{:?}", world.admitted());
    for region in 0..3 {
        assert!(admitted(6.0..9.0, region) > 0, "{:?}", world.admitted());
    }
}

/// Checks that every run of `m` consecutive windows (1 to `longest`) decided at most
/// `bound(m)` admissions worldwide: those sent in the run's first window or later and logged
/// upstream by the end of its last (an admission sent before the run and logged in it may have
/// been decided before it, as tally places it). Prints the fullest run of each length.
fn assert_runs(world: &World, longest: u64, bound: impl Fn(u64) -> u64) {
    let spans: Vec<Span> = world
        .upstream
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|arrival| arrival.global)
        .map(|arrival| Span {
            first: arrival.sent_us / PERIOD_US,
            last: arrival.at_us / PERIOD_US,
        })
        .collect();
    let (Some(first), Some(last)) = (
        spans.iter().map(|span| span.first).min(),
        spans.iter().map(|span| span.last).max(),
    ) else {
        panic!("nothing admitted");
    };
    let t0 = world.t0_us / PERIOD_US;
    for m in 1..=longest {
        let (mut most, mut fullest) = (0, first);
        for start in first..=last {
            let end = start + m - 1;
            let decided = spans
                .iter()
                .filter(|span| span.first >= start && span.last <= end)
                .count() as u64;
            assert!(
                decided <= bound(m),
                "windows {} to {} (from time 0): {decided} admitted, above {}: {:?}",
                start as i64 - t0 as i64,
                end as i64 - t0 as i64,
                bound(m),
                world.admitted()
            );
            if decided > most {
                (most, fullest) = (decided, start);
            }
        }
        eprintln!(
            "{m} window(s): at most {most} (from window {}), bound {}",
            fullest as i64 - t0 as i64,
            bound(m)
        );
    }
}

/// GCRA of 100 per 10 s with a burst of 20: 10 windows of a second, a bucket of 20 refilled 10 a
/// window on the ledger. Bound: any `m` consecutive windows admit at most `20 + 10 m` worldwide
/// (`B + m × Q / k`), checked over every run up to the 10 windows the drivers ask in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_gcra_rule_never_admits_past_its_burst_and_rate() {
    let (limit, period_s, burst) = (100, 10, 20);
    let rule = GlobalRule::Gcra {
        limit,
        period_s,
        burst,
    };
    let per_window = limit / period_s;
    run("global GCRA", rule, per_window, 10, |m| {
        burst + m * per_window
    })
    .await;
}

/// A sliding window of 100 per 4 s in 4 sub-intervals (windows of a second): any 4 consecutive
/// windows admit at most 100 worldwide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_sliding_window_never_admits_past_its_limit_in_any_period() {
    let (limit, sub_intervals) = (100, 4);
    let rule = GlobalRule::SlidingWindow {
        limit,
        sub_intervals,
    };
    run(
        "global sliding window",
        rule,
        limit / sub_intervals,
        sub_intervals,
        |_| limit,
    )
    .await;
}
