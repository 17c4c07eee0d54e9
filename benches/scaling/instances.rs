//! Requests per second against the number of app processes sharing one Redis.
//!
//! Starts [`MOST`] app processes (this program again, with `--serve <redis-url>`), each an axum
//! app with `RateLimitLayer` on a `RedisStore` on its own multi-thread runtime, limiting like the
//! `allowed` scenario of `cargo bench --bench http` (10,000 keys in turn from the `x-key` header,
//! a GCRA quota of 1,000,000/s with a burst of as many: every request admitted). The load
//! generator of that benchmark then spreads its connections over the first 1, 2 or 4 of them
//! (an idle app costs nothing), the counts interleaved over the rounds as the benchmark
//! interleaves its modes. Every process shares the machine's cores with the others, the load
//! generator and Redis.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::HeaderValue;
use axum::routing::get;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use testkit::BoxError;
use testkit::app_process::{AppProcess, listen_for_parent};
use testkit::commands::{self, Calls, command_calls};
use testkit::load::{Load, Outcome, drive};

/// The instance counts measured.
pub(crate) const COUNTS: [usize; 3] = [1, 2, 4];
const MOST: usize = 4;
/// Connections of the load generator, over all instances.
const CONNECTIONS: usize = 32;
const KEYS: usize = 10_000;
const WARM_UP: Duration = Duration::from_millis(500);

/// One instance count's measures, over every round.
pub(crate) struct Point {
    pub(crate) instances: usize,
    pub(crate) total: Outcome,
    pub(crate) per_round: Vec<f64>,
    pub(crate) calls: Calls,
}

impl Point {
    pub(crate) fn evalsha_per_request(&self) -> f64 {
        self.calls.scripts as f64 / self.total.requests().max(1) as f64
    }
}

fn rule() -> Rule {
    Rule::gcra(
        "instances",
        Quota::per_second(1_000_000).with_burst(1_000_000),
    )
}

/// The app process: serves until its standard input closes (the parent ended or dropped it).
pub(crate) fn serve(redis_url: &str) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = RedisStore::open(redis_url)?;
        // Connects and loads the script before the first request.
        let policy = Policy::try_from(rule())?;
        store
            .check(&Key::from_static("warm-up"), &policy, 1)
            .await?;
        let limit = RateLimitLayer::builder()
            .rule(rule())
            .key(HeaderKey::new("x-key"))
            .store(store)
            .failure_mode(FailureMode::Closed)
            .build()?;
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(limit);
        let listener = listen_for_parent().await?;
        axum::serve(listener, app).await?;
        Ok(())
    })
}

pub(crate) fn measure(redis_url: &str, quick: bool) -> Result<Vec<Point>, BoxError> {
    let (rounds, slice) = if quick {
        (1, Duration::from_secs(2))
    } else {
        (3, Duration::from_secs(4))
    };
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut counters = client.block_on(commands::connect(redis_url))?;
    let instances = (0..MOST)
        .map(|_| AppProcess::start(redis_url))
        .collect::<Result<Vec<_>, _>>()?;
    let keys: Arc<[HeaderValue]> = (0..KEYS)
        .map(|i| HeaderValue::from_str(&format!("client-{i}")))
        .collect::<Result<Vec<_>, _>>()?
        .into();
    let load = |count: usize, duration| Load {
        targets: instances[..count].iter().map(AppProcess::address).collect(),
        connections: CONNECTIONS,
        duration,
        keys: Arc::clone(&keys),
    };

    let mut points = COUNTS
        .iter()
        .map(|&instances| {
            Ok(Point {
                instances,
                total: Outcome::empty()?,
                per_round: Vec::new(),
                calls: Calls::default(),
            })
        })
        .collect::<Result<Vec<_>, BoxError>>()?;
    for &count in &COUNTS {
        client.block_on(drive(&load(count, WARM_UP)))?;
    }
    for round in 0..rounds {
        eprintln!("scaling: instances, round {} of {rounds}", round + 1);
        for offset in 0..COUNTS.len() {
            let point = &mut points[(round + offset) % COUNTS.len()];
            let (slice, calls) = client.block_on(async {
                let before = command_calls(&mut counters).await?;
                let slice = drive(&load(point.instances, slice)).await?;
                let after = command_calls(&mut counters).await?;
                Ok::<_, BoxError>((slice, Calls::between(&before, &after)))
            })?;
            if slice.other > 0 {
                return Err(format!(
                    "{} answers were neither 2xx nor 429 with {} instances",
                    slice.other, point.instances
                )
                .into());
            }
            point.per_round.push(slice.per_second());
            point.total.merge(&slice)?;
            point.calls.add(calls);
        }
    }
    drop(instances);
    Ok(points)
}

pub(crate) fn print(points: &[Point]) {
    println!(
        "\nApp processes sharing one Redis (RateLimitLayer on RedisStore, GCRA, {KEYS} keys, \
         {CONNECTIONS} connections):\n"
    );
    println!("| instances | requests/s | per round | p50 µs | p99 µs | calls/req |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for point in points {
        let (low, high) = range(&point.per_round);
        println!(
            "| {} | {:.0} | {low:.0} – {high:.0} | {} | {} | {:.3} |",
            point.instances,
            point.total.per_second(),
            point.total.micros_at(0.5),
            point.total.micros_at(0.99),
            point.evalsha_per_request(),
        );
    }
}

/// The lowest and highest of `values`.
pub(crate) fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, 0.0_f64), |(low, high), &value| {
            (low.min(value), high.max(value))
        })
}
