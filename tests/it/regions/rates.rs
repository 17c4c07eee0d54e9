//! Global rules beyond the fixed window: a GCRA rule and a sliding window, with demand at twice
//! their rate moving from one region to another, then spread over all three. From the log of
//! every admission: never above the bound `docs/regions.md` states, in any run of windows nor in
//! any interval; and what they admit against one exact limiter that sees the same requests.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tower_redis_ratelimit::{Policy, Quota, Rule};

use super::world::{Admission, Setup, World};
use crate::support::RedisServer;

/// Both rules are allotted in windows of a second (time 0 is the start of one).
const WINDOW_US: u64 = 1_000_000;

/// Region 0 asks `rate` per second from 1 s to 4 s, then region 2 (the farthest from the
/// ledger) until 8 s, then all three a third each until 12 s. (Nothing is asked in the first
/// second: a fixed window of the period, from 0, would admit its whole quota in the seconds
/// before the next one starts, and as much again after.)
fn moving(rate: f64) -> impl Fn(usize, f64) -> f64 + Sync {
    move |region, t| match (region, t) {
        (0, t) if (1.0..4.0).contains(&t) => rate,
        (2, t) if (4.0..8.0).contains(&t) => rate,
        (_, t) if t >= 8.0 => rate / 3.0,
        _ => 0.0,
    }
}

/// The admissions worldwide per window (by the window's index since the epoch), every admission
/// counted.
fn per_window(log: &[Admission]) -> BTreeMap<u64, u64> {
    let mut windows = BTreeMap::new();
    for admission in log.iter().filter(|admission| admission.allowed) {
        *windows.entry(admission.at_us / WINDOW_US).or_default() += 1;
    }
    windows
}

/// The most admitted worldwide in any interval of `length_us` (each interval that starts at an
/// admission: the fullest one does).
fn fullest(log: &[Admission], length_us: u64) -> u64 {
    let mut times: Vec<u64> = log
        .iter()
        .filter(|admission| admission.allowed)
        .map(|admission| admission.at_us)
        .collect();
    times.sort_unstable();
    let mut most = 0;
    let mut end = 0;
    for (start, &at) in times.iter().enumerate() {
        while end < times.len() && times[end] < at + length_us {
            end += 1;
        }
        most = most.max((end - start) as u64);
    }
    most
}

/// Checks that every run of `m` consecutive windows (1 to `longest`) admitted at most
/// `bound(m)` worldwide.
fn assert_runs(windows: &BTreeMap<u64, u64>, longest: u64, bound: impl Fn(u64) -> u64) {
    let (Some(&first), Some(&last)) = (windows.keys().next(), windows.keys().last()) else {
        panic!("nothing admitted");
    };
    for start in first..=last {
        let mut sum = 0;
        for m in 1..=longest {
            sum += windows.get(&(start + m - 1)).copied().unwrap_or(0);
            assert!(
                sum <= bound(m),
                "windows {start}..{}: {sum} admitted, above {}: {windows:?}",
                start + m,
                bound(m)
            );
        }
    }
}

/// The requests one exact limiter admits of those asked from time 0: `admits(t)` decides a
/// request at `t` seconds and counts it.
fn exact(world: &World, mut admits: impl FnMut(f64) -> bool) -> u64 {
    let log = world.log.lock().unwrap();
    let mut asked: Vec<u64> = log
        .iter()
        .filter(|admission| admission.at_us >= world.t0_us)
        .map(|admission| admission.at_us)
        .collect();
    asked.sort_unstable();
    asked
        .into_iter()
        .filter(|&at| admits((at - world.t0_us) as f64 / 1e6))
        .count() as u64
}

/// A world whose regions limit `rule` (its ledger fencing `fence`), driven at twice the rule's
/// rate as [`moving`] says for 12 s: the ledger's server, the world, its log and the admissions
/// per window.
async fn run(
    rule: Rule,
    fence: Duration,
) -> (RedisServer, World, Vec<Admission>, BTreeMap<u64, u64>) {
    let quota = rule.quota();
    let setup = Setup {
        policy: Policy::global(rule).unwrap(),
        fence,
        ..Setup::default()
    };
    let ledger = RedisServer::start();
    let world = World::start(setup, ledger.addr()).await;
    let rate = f64::from(quota.limit()) / quota.period().as_secs_f64();
    world.drive(12.0, moving(2.0 * rate)).await;
    let log = world.log.lock().unwrap().clone();
    let windows = per_window(&log);
    eprintln!("admitted per window: {windows:?}");
    (ledger, world, log, windows)
}

/// GCRA of 100 per 10 s with a burst of 20: 10 windows of a second, a bucket of 20 refilled 10 a
/// window on the ledger. Bound: any `m` consecutive windows admit at most `20 + 10 m` worldwide
/// (`B + m × Q / k`), so any interval of `t` at most `20 + 10 (ceil(t) + 1)`. A fixed window of
/// 100 per 10 s, asked at twice its rate, admits 60 in three windows (above 50) and 100 in five
/// seconds (above 80).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_gcra_rule_never_admits_past_its_burst_and_rate() {
    let (limit, period, burst) = (100_u64, Duration::from_secs(10), 20_u64);
    let rule = Rule::gcra(
        "rate",
        Quota::new(limit as u32, period).with_burst(burst as u32),
    );
    // Fenced for the bucket's refill from empty (two windows) and two windows more.
    let (_ledger, world, log, windows) = run(rule, Duration::from_secs(4)).await;
    let per_window_rate = limit / 10;
    assert_runs(&windows, 13, |m| burst + m * per_window_rate);
    for seconds in [1_u64, 2, 3, 5, 10] {
        let most = fullest(&log, seconds * WINDOW_US);
        let bound = burst + (seconds + 1) * per_window_rate;
        eprintln!("fullest {seconds} s: {most} (bound {bound})");
        assert!(most <= bound, "{most} in {seconds} s, above {bound}");
    }

    // Against one exact GCRA of the same rate and burst that saw every request.
    let rate = limit as f64 / period.as_secs_f64();
    let (mut level, mut last) = (0.0_f64, 0.0_f64);
    let ideal = exact(&world, |t| {
        level = (level - (t - last) * rate).max(0.0);
        last = t;
        let admit = level + 1.0 <= burst as f64;
        if admit {
            level += 1.0;
        }
        admit
    });
    assert_admitted_most(&world, "gcra", ideal, 70);
}

/// The regions admitted (from time 0) at least `percent` % of what one exact limiter admits of
/// the same requests, `ideal`; and each region that asked admitted.
fn assert_admitted_most(world: &World, rule: &str, ideal: u64, percent: u64) {
    let admitted = world
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a.allowed && a.at_us >= world.t0_us)
        .count() as u64;
    eprintln!("{rule}: admitted {admitted} of an exact limiter's {ideal}");
    assert!(
        admitted * 100 >= ideal * percent,
        "{rule}: admitted {admitted}, an exact limiter {ideal}"
    );
    assert_followed(world);
}

/// Each region that asked admitted: region 0 in its four seconds, region 2 once the demand
/// moved to it, and every region once it spread.
fn assert_followed(world: &World) {
    let windows = world.admitted();
    eprintln!("admitted per second and region: {windows:?}");
    let sum = |region: usize, seconds: std::ops::Range<usize>| -> u64 {
        seconds
            .filter_map(|second| windows.get(second))
            .map(|window| window[region])
            .sum()
    };
    assert!(sum(0, 0..4) > 0, "{windows:?}");
    assert!(sum(2, 5..8) > 0, "{windows:?}");
    assert!((0..3).all(|region| sum(region, 9..12) > 0), "{windows:?}");
}

/// A sliding window of 100 per 4 s in 4 sub-intervals (windows of a second): any 4 consecutive
/// windows admit at most 100 worldwide, so any interval of 4 s at most 100 and the units of the
/// one window it starts in (the bound of the sliding window in one region). A fixed window of 100
/// per 4 s from time 0 admits 100 from 1 s to 3 s and 50 more from 4 s: 150 in windows 1 to 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_sliding_window_never_admits_past_its_limit_in_any_period() {
    let (limit, period) = (100_u64, Duration::from_secs(4));
    let rule = Rule::sliding_window("sliding", Quota::new(limit as u32, period), 4);
    // Fenced for a period: the windows an earlier life's grants bear on.
    let (_ledger, world, log, windows) = run(rule, period).await;
    assert_runs(&windows, 4, |_| limit);
    // Any interval of a period: the limit, and what the window it starts in admitted.
    let mut times: Vec<u64> = log.iter().filter(|a| a.allowed).map(|a| a.at_us).collect();
    times.sort_unstable();
    let mut end = 0;
    for (start, &at) in times.iter().enumerate() {
        while end < times.len() && times[end] < at + 4 * WINDOW_US {
            end += 1;
        }
        let bound = limit + windows[&(at / WINDOW_US)];
        assert!((end - start) as u64 <= bound, "{} from {at}", end - start);
    }
    eprintln!("fullest 4 s: {}", fullest(&log, 4 * WINDOW_US));

    // Against one exact sliding log of the same limit that saw every request.
    let mut admitted_at = VecDeque::new();
    let ideal = exact(&world, |t| {
        while admitted_at.front().is_some_and(|&at| at <= t - 4.0) {
            admitted_at.pop_front();
        }
        let admit = (admitted_at.len() as u64) < limit;
        if admit {
            admitted_at.push_back(t);
        }
        admit
    });
    assert_admitted_most(&world, "sliding window", ideal, 70);
}
