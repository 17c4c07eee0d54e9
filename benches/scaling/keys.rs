//! The cost of one decision against the number of live keys, for both stores.
//!
//! The key counts are 1, 10, ... 10^6, grown in place: each step adds the keys it lacks (one
//! admitted decision each, which writes their state), then measures decisions cycling through all
//! of them in order. The quota (1 per minute with a burst of 10^7) admits every decision of the
//! run and keeps each key's state for a minute per decision taken, so every key of a step is live
//! while it is measured (the Redis rows print `DBSIZE` to show it).
//!
//! - Memory: `Store::check` in a loop on one thread, inside a Tokio runtime as the layer calls it
//!   (at least 10^6 decisions per step, whole passes over the keys).
//! - Redis: `RedisStore::check` on one multiplexed connection, [`IN_FLIGHT`] decisions in flight
//!   at once (time per decision: the run's time over its decisions, what Redis sustains), and one
//!   at a time (a round trip each), on a single-threaded runtime.

use std::cell::Cell;
use std::hint::black_box;
use std::pin::pin;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::try_join_all;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, MemoryStore, Policy, Quota, RedisStore, Rule, Store};

use testkit::BoxError;
use testkit::commands;

/// Redis decisions in flight at once in the throughput measure.
pub(crate) const IN_FLIGHT: usize = 64;
/// Memory-store decisions per step, at least.
const MEMORY_DECISIONS: usize = 1_000_000;

/// One key count's measures.
pub(crate) struct Point {
    pub(crate) keys: usize,
    /// Nanoseconds per memory-store decision.
    pub(crate) memory_ns: f64,
    /// Nanoseconds per Redis decision with [`IN_FLIGHT`] in flight.
    pub(crate) redis_in_flight_ns: f64,
    /// Nanoseconds per Redis decision, one at a time.
    pub(crate) redis_one_ns: f64,
    /// The growth of Redis's `used_memory` since it held no key, over the keys.
    pub(crate) redis_bytes_per_key: f64,
    /// Redis's `DBSIZE` after the step: every key still live.
    pub(crate) redis_live: u64,
}

fn policy() -> Result<Policy, BoxError> {
    Ok(Policy::try_from(Rule::gcra(
        "keys",
        Quota::per_minute(1).with_burst(10_000_000),
    ))?)
}

fn admitted(decision: Decision) -> Result<(), BoxError> {
    if decision.is_allowed() {
        Ok(())
    } else {
        Err("a decision was refused: the benchmark's quota must admit every one".into())
    }
}

pub(crate) fn measure(redis_url: &str, quick: bool) -> Result<Vec<Point>, BoxError> {
    let counts: Vec<usize> = (0..=if quick { 5 } else { 6 })
        .map(|exponent| 10_usize.pow(exponent))
        .collect();
    let largest = counts.last().copied().unwrap_or(1);
    let keys: Vec<Key> = (0..largest)
        .map(|i| Key::from(format!("client-{i}")))
        .collect();
    let policy = policy()?;
    let memory = memory(&keys, &counts, &policy)?;
    let slice = if quick {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(1)
    };
    let redis = redis(redis_url, &keys, &counts, &policy, slice)?;
    Ok(counts
        .iter()
        .zip(memory)
        .zip(redis)
        .map(|((&keys, memory_ns), redis)| Point {
            keys,
            memory_ns,
            ..redis
        })
        .collect())
}

/// Nanoseconds per memory-store decision at each key count.
fn memory(keys: &[Key], counts: &[usize], policy: &Policy) -> Result<Vec<f64>, BoxError> {
    // Inside a runtime, as the layer calls the store (outside, it looks for one now and then).
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let _inside = runtime.enter();
    let store = MemoryStore::builder().max_keys(2 * keys.len()).build();
    let decide = |key: &Key| -> Result<(), BoxError> {
        let decision = store
            .check(black_box(key), policy, 1)
            .take_ready()
            .ok_or("the memory store answers at once")??;
        admitted(black_box(decision))
    };
    let mut live = 0;
    let mut costs = Vec::new();
    for &count in counts {
        keys[live..count].iter().try_for_each(decide)?;
        live = count;
        let passes = MEMORY_DECISIONS.div_ceil(count);
        let started = Instant::now();
        for _ in 0..passes {
            keys[..count].iter().try_for_each(decide)?;
        }
        costs.push(started.elapsed().as_nanos() as f64 / (passes * count) as f64);
    }
    Ok(costs)
}

/// The Redis measures at each key count (the memory field left at 0).
fn redis(
    url: &str,
    keys: &[Key],
    counts: &[usize],
    policy: &Policy,
    slice: Duration,
) -> Result<Vec<Point>, BoxError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = RedisStore::open(url)?;
        let mut admin = commands::connect(url).await?;
        // Whatever ran before (the app processes' keys) is gone before the memory baseline.
        let _: () = redis::cmd("FLUSHALL").query_async(&mut admin).await?;
        // Connects and loads the script; its key is deleted below, before the first step.
        let warm = Key::from_static("warm-up");
        admitted(store.check(&warm, policy, 1).await?)?;
        for state in store.state_keys(&warm, policy) {
            let _: u64 = redis::cmd("DEL").arg(state).query_async(&mut admin).await?;
        }
        let empty = used_memory(&mut admin).await?;
        let mut live = 0;
        let mut points = Vec::new();
        for &count in counts {
            let mut checks = pin!(
                futures_util::stream::iter(&keys[live..count])
                    .map(|key| store.check(key, policy, 1))
                    .buffer_unordered(4 * IN_FLIGHT)
            );
            while let Some(decision) = checks.next().await {
                admitted(decision?)?;
            }
            live = count;
            let redis_bytes_per_key =
                used_memory(&mut admin).await?.saturating_sub(empty) as f64 / count as f64;
            let redis_in_flight_ns =
                decisions(&store, &keys[..count], policy, IN_FLIGHT, slice).await?;
            let redis_one_ns = decisions(&store, &keys[..count], policy, 1, slice / 2).await?;
            let redis_live: u64 = redis::cmd("DBSIZE").query_async(&mut admin).await?;
            eprintln!("scaling: {count} keys measured");
            points.push(Point {
                keys: count,
                memory_ns: 0.0,
                redis_in_flight_ns,
                redis_one_ns,
                redis_bytes_per_key,
                redis_live,
            });
        }
        Ok(points)
    })
}

/// Runs decisions through `keys` in turn, `in_flight` at a time, for `slice`: nanoseconds of
/// the run per decision.
async fn decisions(
    store: &RedisStore,
    keys: &[Key],
    policy: &Policy,
    in_flight: usize,
    slice: Duration,
) -> Result<f64, BoxError> {
    let next = Cell::new(0_usize);
    let started = Instant::now();
    let deadline = started + slice;
    let workers = (0..in_flight).map(|_| async {
        let mut done = 0_u64;
        while Instant::now() < deadline {
            let key = &keys[next.get() % keys.len()];
            next.set(next.get() + 1);
            admitted(store.check(key, policy, 1).await?)?;
            done += 1;
        }
        Ok::<_, BoxError>(done)
    });
    let done: u64 = try_join_all(workers).await?.into_iter().sum();
    Ok(started.elapsed().as_nanos() as f64 / done.max(1) as f64)
}

async fn used_memory(connection: &mut redis::aio::MultiplexedConnection) -> Result<u64, BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(connection)
        .await?;
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|bytes| bytes.trim().parse().ok())
        .ok_or_else(|| "no used_memory in INFO memory".into())
}

pub(crate) fn print(points: &[Point]) {
    println!("\nDecision cost against live keys (GCRA; ns per decision):\n");
    println!(
        "| live keys | memory | Redis, {IN_FLIGHT} in flight | Redis, one at a time | Redis \
         used_memory growth per key (bytes) | Redis DBSIZE |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for point in points {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
            point.keys,
            point.memory_ns,
            point.redis_in_flight_ns,
            point.redis_one_ns,
            point.redis_bytes_per_key,
            point.redis_live,
        );
    }
}
