//! Run with: cargo bench --bench regions [-- PATH.svg]
//!
//! One quota across three regions (`store::region::RegionStore`), against one exact global counter on
//! the same trace, at 30, 100 and 150 ms one way between each region and the ledger. Everything
//! runs on this machine: each region its own `redis-server` and one instance, the ledger's
//! `redis-server` reached through a `testkit::wan::WanLink` per region that adds the latency.
//! Quota: 200 units per one-second window; `sync_every` 50 ms; `max_skew` 2 ms (one clock).
//!
//! The trace, the same at every latency, in windows from the first the ledger grants: region A
//! asks 1.5× the quota for 3 windows; then, from 3.5 (mid-window), region B asks as much
//! instead; from 6 to 8 every region asks half the quota (1.5× in all). `REGIONS_PERIOD_MS`
//! sets the window (default 1000 ms); the trace scales with it.
//!
//! For each latency it prints:
//! - `utilisation`: units admitted over what one exact global fixed-window counter admits on
//!   the same asks (per window, the quota or the asks if fewer);
//! - `overshoot`: the fullest window's admissions over the quota (at most 100%: never more);
//! - `convergence`: from the moment B's demand appears to B's first admission (its first
//!   allotment arriving: a tick and a round trip to the ledger);
//! - `extra calls/s`: per region, the calls to its own Redis besides one per request (demand
//!   reports, leadership, moves) and the calls to the ledger (takes, credits);
//! - `p50 / p99`: a request's decision in a region, against a plain `RedisStore` with a fixed
//!   window on one Redis (a single-region deployment, every decision a call to Redis), measured
//!   the same way. Both run in this one process beside the regions' movers and WAN proxies.
//!
//! It draws `docs/regions.svg`: admissions per window and region at 100 ms, with the quota.
//! The markdown table it prints is the one in `docs/regions.md`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use testkit::wan::WanLink;
use testkit::{BoxError, RedisServer};
use tower_redis_ratelimit::clock::{Clock, SystemClock};
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::region::{Ledger, RegionStore};
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

const QUOTA: u32 = 200;
/// The window, `REGIONS_PERIOD_MS` (default 1000): the trace's times scale with it.
fn period_us() -> u64 {
    static PERIOD: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PERIOD.get_or_init(|| testkit::env_or("REGIONS_PERIOD_MS", 1_000_u64).unwrap_or(1_000) * 1_000)
}
const SKEW: Duration = Duration::from_millis(2);
/// The run's length, in windows.
const RUN: f64 = 8.0;
/// The trace's demand move, in windows: B's demand appears here.
const MOVE: f64 = 3.5;

fn run_seconds() -> f64 {
    RUN * period_us() as f64 / 1e6
}

/// Units per window region `region` asks at `t` windows.
fn demand(region: usize, t: f64) -> f64 {
    let quota = f64::from(QUOTA);
    match (region, t) {
        (_, t) if t >= 6.0 => quota / 2.0,
        (0, t) if t < 3.0 => 1.5 * quota,
        (1, t) if t >= MOVE => 1.5 * quota,
        _ => 0.0,
    }
}

/// One request: when, where, admitted or not.
struct Asked {
    at_us: u64,
    region: usize,
    allowed: bool,
}

struct Run {
    log: Vec<Asked>,
    t0_us: u64,
    latency: Histogram<u64>,
    region_calls: u64,
    ledger_calls: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    if !testkit::run_by_cargo_bench("regions") {
        return Ok(());
    }
    let path = testkit::args()
        .into_iter()
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/docs/regions.svg").to_owned());
    let baseline = single_region().await?;
    println!(
        "| between regions | utilisation | overshoot | convergence | extra calls/s per region (own Redis + ledger) | p50 / p99 in a region | p50 / p99, one region |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut chart_run = None;
    for latency_ms in [30, 100, 150] {
        let run = run(Duration::from_millis(latency_ms)).await?;
        let windows = windows(&run);
        let admitted: u64 = windows.iter().map(|w| w.admitted.iter().sum::<u64>()).sum();
        let exact: u64 = windows.iter().map(|w| w.asked.min(u64::from(QUOTA))).sum();
        let fullest = windows
            .iter()
            .map(|w| w.admitted.iter().sum::<u64>())
            .max()
            .unwrap_or(0);
        let convergence = run
            .log
            .iter()
            .filter(|asked| asked.region == 1 && asked.allowed)
            .map(|asked| seconds(&run, asked.at_us) - MOVE * period_us() as f64 / 1e6)
            .find(|since| *since >= 0.0)
            .unwrap_or(f64::NAN);
        println!(
            "| {latency_ms} ms | {:.1}% | {:.0}% | {:.0} ms | {:.1} + {:.1} | {:.2} / {:.2} ms | {:.2} / {:.2} ms |",
            100.0 * admitted as f64 / exact as f64,
            100.0 * fullest as f64 / f64::from(QUOTA),
            convergence * 1000.0,
            run.region_calls as f64 / 3.0 / run_seconds(),
            run.ledger_calls as f64 / 3.0 / run_seconds(),
            ms(run.latency.value_at_quantile(0.5)),
            ms(run.latency.value_at_quantile(0.99)),
            ms(baseline.value_at_quantile(0.5)),
            ms(baseline.value_at_quantile(0.99)),
        );
        if latency_ms == 100 {
            chart_run = Some(windows);
        }
    }
    if let Some(windows) = chart_run {
        std::fs::write(&path, chart(&windows))?;
        println!("\nwrote {path}");
    }
    Ok(())
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn seconds(run: &Run, at_us: u64) -> f64 {
    (at_us as f64 - run.t0_us as f64) / 1e6
}

/// What a window saw: asks in all, admissions per region.
struct WindowCount {
    asked: u64,
    admitted: [u64; 3],
}

fn windows(run: &Run) -> Vec<WindowCount> {
    let count = RUN as usize;
    let mut windows: Vec<WindowCount> = (0..count)
        .map(|_| WindowCount {
            asked: 0,
            admitted: [0; 3],
        })
        .collect();
    for asked in &run.log {
        let Some(since) = asked.at_us.checked_sub(run.t0_us) else {
            continue;
        };
        let index = usize::try_from(since / period_us()).unwrap_or(usize::MAX);
        let Some(window) = windows.get_mut(index) else {
            continue;
        };
        window.asked += 1;
        if asked.allowed {
            window.admitted[asked.region] += 1;
        }
    }
    windows
}

fn fcalls(server: &RedisServer) -> u64 {
    let calls = server.command_calls();
    ["fcall", "evalsha", "wait", "ping"]
        .iter()
        .map(|name| calls.get(*name).copied().unwrap_or(0))
        .sum()
}

async fn run(latency: Duration) -> Result<Run, BoxError> {
    let ledger_server = RedisServer::try_start()?;
    let declared = Ledger::new(RedisStore::open(&ledger_server.url())?)
        .declare_new(SKEW)
        .await?;
    let mut regions = Vec::new();
    for index in 0..3 {
        let redis = RedisServer::try_start()?;
        let link = WanLink::start(ledger_server.addr(), latency);
        let store = RegionStore::builder(
            format!("region-{index}"),
            RedisStore::open(&redis.url())?,
            Ledger::new(RedisStore::open(&link.url())?),
        )
        .max_skew(SKEW)
        .sync_every(Duration::from_millis(50))
        .build()?;
        regions.push((redis, link, store));
    }
    let policy = Policy::global(Rule::fixed_window(
        "api",
        Quota::new(QUOTA, Duration::from_micros(period_us())),
    ))?;
    // The first window the ledger grants: one period and twice the skew after its declaration.
    let period = period_us();
    let fence = declared + period + 2 * u64::try_from(SKEW.as_micros())?;
    let t0_us = (fence / period + 1) * period;
    let clock = SystemClock::new();
    let before: Vec<u64> = regions.iter().map(|(redis, ..)| fcalls(redis)).collect();
    let ledger_before = fcalls(&ledger_server);
    // Asked from half a window before time 0, as the tests do: the first window is taken ahead.
    let start = t0_us - period / 2;
    while clock.now_micros() < start {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let key = Key::from("customer-7");
    let mut log = Vec::new();
    let mut latency_histogram = Histogram::<u64>::new(3)?;
    let mut owed = [0.0_f64; 3];
    let mut last = clock.now_micros();
    let end = t0_us + (RUN * period as f64) as u64;
    while clock.now_micros() < end {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = clock.now_micros();
        let t = (now as f64 - t0_us as f64) / period as f64;
        let elapsed = (now - last) as f64 / period as f64;
        last = now;
        for (region, owed) in owed.iter_mut().enumerate() {
            *owed += demand(region, t) * elapsed;
            while *owed >= 1.0 {
                *owed -= 1.0;
                let asked_at = Instant::now();
                let at_us = clock.now_micros();
                let allowed = regions[region]
                    .2
                    .check(&key, &policy, 1)
                    .await
                    .is_ok_and(|decision| decision.is_allowed());
                latency_histogram.record(u64::try_from(asked_at.elapsed().as_micros())?)?;
                log.push(Asked {
                    at_us,
                    region,
                    allowed,
                });
            }
        }
    }
    let checks: Vec<u64> = (0..3)
        .map(|region| log.iter().filter(|asked| asked.region == region).count() as u64)
        .collect();
    let region_calls = regions
        .iter()
        .zip(&before)
        .zip(&checks)
        .map(|(((redis, ..), before), checks)| (fcalls(redis) - before).saturating_sub(*checks))
        .sum();
    let ledger_calls = fcalls(&ledger_server) - ledger_before;
    Ok(Run {
        log,
        t0_us,
        latency: latency_histogram,
        region_calls,
        ledger_calls,
    })
}

/// A request's decision with a plain Redis store and a fixed window, at the same pace: every
/// one a call to Redis, as a region's are (a quota nothing exceeds, no denial cache).
async fn single_region() -> Result<Histogram<u64>, BoxError> {
    let redis = RedisServer::try_start()?;
    let store = RedisStore::builder(&redis.url()).denial_cache(0).build()?;
    let policy = Policy::try_from(Rule::fixed_window(
        "api",
        Quota::new(u32::MAX, Duration::from_micros(period_us())),
    ))?;
    let key = Key::from("customer-7");
    let mut histogram = Histogram::<u64>::new(3)?;
    for _ in 0..2_000 {
        let asked_at = Instant::now();
        let _ = store.check(&key, &policy, 1).await;
        histogram.record(u64::try_from(asked_at.elapsed().as_micros())?)?;
        tokio::time::sleep(Duration::from_micros(1_500)).await;
    }
    Ok(histogram)
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 600.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 310.0;
const COLOURS: [&str; 3] = ["#2f7ed8", "#e8871e", "#27ae60"];

/// Stacked bars: each window's admissions by region, the quota as a line.
fn chart(windows: &[WindowCount]) -> String {
    let y_max = f64::from(QUOTA) * 1.25;
    let y = |units: f64| BOTTOM - (BOTTOM - TOP) * units / y_max;
    let slot = (RIGHT - LEFT) / windows.len() as f64;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/><text x="{LEFT}" y="18">Admitted per {} ms window, three regions 100 ms from the ledger (quota {QUOTA})</text>"##,
        period_us() / 1000
    );
    for (index, window) in windows.iter().enumerate() {
        let x = LEFT + slot * index as f64 + slot * 0.15;
        let mut base = 0.0;
        for (region, &units) in window.admitted.iter().enumerate() {
            let top = base + units as f64;
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                y(top),
                slot * 0.7,
                y(base) - y(top),
                COLOURS[region]
            );
            base = top;
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{index}</text>"#,
            x + slot * 0.35,
            BOTTOM + 18.0
        );
    }
    let quota = y(f64::from(QUOTA));
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" x2="{RIGHT}" y1="{quota:.1}" y2="{quota:.1}" stroke="#c0392b" stroke-width="2" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" fill="#c0392b">quota</text>"##,
        RIGHT + 6.0,
        quota + 4.0
    );
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{BOTTOM}" stroke="#222"/><line x1="{LEFT}" x2="{RIGHT}" y1="{BOTTOM}" y2="{BOTTOM}" stroke="#222"/><text x="{:.1}" y="{:.1}" text-anchor="middle">window (since the first granted)</text>"##,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0
    );
    for units in [0, 50, 100, 150, 200, 250] {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{units}</text>"#,
            LEFT - 6.0,
            y(f64::from(units)) + 4.0
        );
    }
    for (region, name) in [
        "A (1.5× quota, windows 0–3)",
        "B (1.5× quota, from 3.5)",
        "C",
    ]
    .iter()
    .enumerate()
    {
        let top = TOP + 30.0 + 22.0 * region as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            RIGHT + 10.0,
            top,
            COLOURS[region],
            RIGHT + 28.0,
            top + 11.0
        );
    }
    let _ = writeln!(svg, "</svg>");
    svg
}
