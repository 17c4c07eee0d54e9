//! Run with: cargo bench --bench lease_accuracy
//!
//! What quota leases cost in exactness, measured against the exact Redis store on the same
//! traffic. One hot key is shared by 1 to 8 instances (each its own `RedisStore`, all on one
//! `redis-server` this program starts); requests arrive as a Poisson stream at half, once and
//! twice the quota's rate, each at an instance picked at random, in simulated time (a
//! `ManualClock` every store reads), for 30 simulated seconds per run. The same seeded trace runs
//! through stores with leases (`QuotaLeases::default()`: slices of at most a tenth of what a rule
//! gives in a lifetime, a 100 ms lifetime) and through stores without, for each leasable
//! algorithm, and for GCRA and the token bucket with a burst of a tenth of their rate too.
//!
//! For each run it prints:
//! - `admitted`: requests admitted with leases, and by the exact stores;
//! - `under`: how many fewer the leases admitted, as a share of what the exact stores admitted
//!   (the price of slices held by one instance while another is denied);
//! - `excess`: the most the leases admitted beyond the quota anywhere in the run: for the fixed
//!   window, the fullest window's count over the limit; for GCRA and the token bucket, the burst
//!   the admitted requests needed beyond the configured one (0: every admission conformed to
//!   the rule);
//! - `calls/req`: Redis calls (grants, refunds and exact checks) per request with leases.
//!
//! The markdown table it prints is the one in `docs/performance.md`.

use std::time::Duration;

use testkit::commands;
use testkit::{BoxError, RedisServer};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::QuotaLeases;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
/// The quota of every run: 1,000 requests per second (the buckets' burst is 1,000 too).
const LIMIT: u32 = 1_000;
/// Simulated time per run.
const RUN: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let redis = RedisServer::try_start()?;
    println!(
        "| algorithm | instances | offered | admitted, leases | admitted, exact | under | excess | calls/req |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut run = 0;
    for (name, rule) in rules() {
        for instances in [1, 2, 4, 8] {
            for load in [0.5, 1.0, 2.0] {
                run += 1;
                let trace = trace(run, instances, load);
                let exact = replay(&redis, run, &rule, instances, &trace, false).await?;
                let leased = replay(&redis, run, &rule, instances, &trace, true).await?;
                let under = 1.0 - leased.admitted.len() as f64 / exact.admitted.len() as f64;
                println!(
                    "| {name} | {instances} | {load}× | {} | {} | {:.2}% | {} | {:.3} |",
                    leased.admitted.len(),
                    exact.admitted.len(),
                    100.0 * under,
                    excess(&rule, &leased.admitted),
                    leased.calls as f64 / trace.len() as f64,
                );
            }
        }
    }
    Ok(())
}

fn rules() -> [(&'static str, Rule); 5] {
    let quota = Quota::per_second(LIMIT).with_burst(LIMIT);
    // A burst of a tenth of the rate: a lease's rate (what drains back in its lifetime) is as
    // large as the bucket itself.
    let small = Quota::per_second(LIMIT).with_burst(LIMIT / 10);
    [
        ("fixed window", Rule::fixed_window("fw", quota)),
        ("GCRA", Rule::gcra("gcra", quota)),
        ("token bucket", Rule::token_bucket("tb", quota)),
        ("GCRA, burst 100", Rule::gcra("gcra", small)),
        ("token bucket, burst 100", Rule::token_bucket("tb", small)),
    ]
}

/// A request: when (µs after `T0`) and at which instance.
type Arrival = (u64, usize);

/// Poisson arrivals at `load` times the quota's rate, each at a random one of `instances`.
fn trace(seed: u64, instances: usize, load: f64) -> Vec<Arrival> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let rate_per_us = load * f64::from(LIMIT) / 1e6;
    let mut at = 0.0;
    let mut trace = Vec::new();
    loop {
        at += -(1.0 - rng.f64()).ln() / rate_per_us;
        if at >= RUN.as_micros() as f64 {
            return trace;
        }
        trace.push((at as u64, rng.usize(..instances)));
    }
}

struct Replayed {
    /// When each admitted request arrived (µs after `T0`).
    admitted: Vec<u64>,
    /// Redis calls made.
    calls: u64,
}

/// Runs `trace` through `instances` stores, with or without leases, on a key of its own.
async fn replay(
    redis: &RedisServer,
    run: u64,
    rule: &Rule,
    instances: usize,
    trace: &[Arrival],
    leases: bool,
) -> Result<Replayed, BoxError> {
    let clock = ManualClock::new(T0);
    let stores = (0..instances)
        .map(|_| {
            let builder = RedisStore::builder(&redis.url()).clock(clock.clone());
            let builder = if leases {
                builder.quota_leases(QuotaLeases::default())
            } else {
                builder
            };
            builder.build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = Policy::try_from(rule.clone())?;
    let key = Key::from(format!("run-{run}-{leases}"));
    let mut counters = commands::connect(&redis.url()).await?;
    let before = commands::command_calls(&mut counters).await?;
    let mut admitted = Vec::new();
    for &(at, instance) in trace {
        clock.set(T0 + at);
        if stores[instance].check(&key, &policy, 1).await?.is_allowed() {
            admitted.push(at);
        }
        // Let grants asked in the background land, as they would between requests.
        tokio::task::yield_now().await;
    }
    for store in &stores {
        store.return_leases().await?;
    }
    let after = commands::command_calls(&mut counters).await?;
    let calls = commands::Calls::between(&before, &after).scripts;
    Ok(Replayed { admitted, calls })
}

/// How far the admitted requests went beyond `rule`'s quota (see the module docs).
fn excess(rule: &Rule, admitted: &[u64]) -> i64 {
    let quota = rule.quota();
    let period = quota.period().as_micros() as u64;
    if rule.name() == "fw" {
        // Windows start with the first request after the previous one ended.
        let (mut start, mut count, mut fullest) = (None::<u64>, 0_i64, 0_i64);
        for &at in admitted {
            if start.is_none_or(|start| at >= start + period) {
                start = Some(at);
                count = 0;
            }
            count += 1;
            fullest = fullest.max(count);
        }
        return fullest - i64::from(quota.limit());
    }
    // GCRA's virtual scheduling without denials: the burst each request would have needed.
    let emission = period as f64 / f64::from(quota.limit());
    let mut tat = 0.0_f64;
    let mut needed = 0_i64;
    for &at in admitted {
        let at = at as f64;
        tat = tat.max(at) + emission;
        needed = needed.max(((tat - at) / emission).ceil() as i64);
    }
    needed - i64::from(quota.burst())
}
