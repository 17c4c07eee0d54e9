//! Run with: cargo bench --bench soak
//!
//! Soak and chaos: mixed traffic from several app processes on a Redis Cluster while primaries
//! are killed and restarted, then a report (markdown, printed) of what clients saw.
//!
//! - A cluster of three primaries with a replica each (started here, as the tests start theirs:
//!   `redis-server --cluster-enabled yes`, `redis-cli --cluster create`).
//! - `SOAK_APPS` app processes (default 3: this program again, with `--serve`), each an axum app
//!   on `RedisStore::cluster`, both layers failing open with a 100 ms deadline: `/rate`, GCRA at
//!   20/s with a burst of 20 per `x-key` (400 keys); `/slow`, at most 2 in flight per `x-key`
//!   (a concurrency limit with 5 s leases), whose handler takes 5 to 20 ms.
//! - A load generator here: 24 client tasks over keep-alive connections, each request to a random
//!   app, 85% to `/rate`, 15% to `/slow`, with a random key.
//! - Every `SOAK_KILL_EVERY` seconds (default 60), a random primary is killed (SIGKILL); 15 s
//!   later it is started again (it rejoins as a replica of its successor), and the run waits
//!   for the cluster to be whole.
//! - `SOAK_SECONDS` (default 600) in all.
//!
//! It reports: requests by status; 5xx (fail open: must be 0); requests past the deadline (a
//! `/rate` answer later than the 100 ms deadline plus 50 ms of slack: must be 0); concurrency
//! permits still held in Redis once the load stopped, at once and after a lease (must be 0 then);
//! each app's memory (RSS) after warm-up and at the end; and over-admission: each key's admitted
//! `/rate` requests replayed through an exact GCRA, the most burst any key needed beyond the
//! configured 20, overall and around each failover.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use testkit::BoxError;
use testkit::app_process::{AppProcess, listen_for_parent};
use testkit::cluster::RedisCluster;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{ConcurrencyLimitLayer, Quota, RateLimitLayer, RedisStore, Rule};

const DEADLINE: Duration = Duration::from_millis(100);
const SLACK: Duration = Duration::from_millis(50);
const RATE: u32 = 20;
const KEYS: usize = 400;
const CLIENTS: usize = 24;
const LEASE: Duration = Duration::from_secs(5);

fn main() -> Result<(), BoxError> {
    let args = testkit::args();
    if args.first().map(String::as_str) == Some("--serve") {
        return serve(&args[1]);
    }
    let setting = |name: &str, default: u64| -> Result<u64, BoxError> {
        match std::env::var(name) {
            Ok(value) => Ok(value.parse().map_err(|_| format!("{name}: not a number"))?),
            Err(_) => Ok(default),
        }
    };
    let seconds = setting("SOAK_SECONDS", 600)?;
    let apps = setting("SOAK_APPS", 3)? as usize;
    let kill_every = setting("SOAK_KILL_EVERY", 60)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(
        Duration::from_secs(seconds),
        apps,
        Duration::from_secs(kill_every),
    ))
}

/// An app process: serves until its standard input closes.
fn serve(urls: &str) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = RedisStore::cluster(urls.split(',')).build()?;
        let rate = RateLimitLayer::builder()
            .rule(Rule::gcra("rate", Quota::per_second(RATE).with_burst(RATE)))
            .key(HeaderKey::new("x-key"))
            .store(store.clone())
            .failure_mode(FailureMode::Open)
            .deadline(DEADLINE)
            .build()?;
        let slow = ConcurrencyLimitLayer::builder()
            .name("slow")
            .max_in_flight(2)
            .key(HeaderKey::new("x-key"))
            .store(store)
            .permit_ttl(LEASE)
            .failure_mode(FailureMode::Open)
            .deadline(DEADLINE)
            .build()?;
        let app = Router::new()
            .route("/rate", get(|| async { "ok" }).layer(rate))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(fastrand::u64(5..=20))).await;
                    "done"
                })
                .layer(slow),
            );
        let listener = listen_for_parent().await?;
        axum::serve(listener, app).await?;
        Ok(())
    })
}

/// What the clients saw.
#[derive(Default)]
struct Seen {
    by_status: Mutex<HashMap<u16, u64>>,
    errors: AtomicU64,
    past_deadline: AtomicU64,
    slowest_rate_us: AtomicU64,
    /// Per key, when each admitted `/rate` request was sent (µs since the start).
    admitted: Mutex<Vec<Vec<u64>>>,
}

async fn run(length: Duration, apps: usize, kill_every: Duration) -> Result<(), BoxError> {
    let cluster = Arc::new(Mutex::new(RedisCluster::start()));
    let urls = cluster.lock().unwrap().urls_joined();
    let children: Vec<AppProcess> = (0..apps)
        .map(|_| AppProcess::start(&urls))
        .collect::<Result<_, _>>()?;
    let addresses: Vec<String> = children
        .iter()
        .map(|app| format!("http://{}", app.address()))
        .collect();
    let seen = Arc::new(Seen {
        admitted: Mutex::new(vec![Vec::new(); KEYS]),
        ..Seen::default()
    });
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()?;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (client, addresses, seen, stop) = (
                client.clone(),
                addresses.clone(),
                seen.clone(),
                stop.clone(),
            );
            tokio::spawn(drive(client, addresses, seen, stop, started))
        })
        .collect();

    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_start: Vec<u64> = children.iter().map(|app| rss_kib(app.id())).collect();
    let mut failovers = Vec::new();
    let mut next_kill = started + kill_every;
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if Instant::now() >= next_kill && started.elapsed() + Duration::from_secs(20) < length {
            let handle = cluster.clone();
            let at = started.elapsed();
            let victim = tokio::task::spawn_blocking(move || {
                let mut cluster = handle.lock().unwrap();
                let primaries = cluster.primaries();
                let victim = primaries[fastrand::usize(..primaries.len())];
                cluster.kill(victim);
                victim
            })
            .await?;
            eprintln!("soak: {:>4}s killed primary node {victim}", at.as_secs());
            tokio::time::sleep(Duration::from_secs(15)).await;
            let handle = cluster.clone();
            tokio::task::spawn_blocking(move || {
                let mut cluster = handle.lock().unwrap();
                cluster.restart(victim);
                cluster.wait_until_ready(Duration::from_secs(60));
            })
            .await?;
            eprintln!(
                "soak: {:>4}s node {victim} back, cluster whole",
                started.elapsed().as_secs()
            );
            failovers.push(at);
            next_kill += kill_every;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await?;
    }
    let rss_end: Vec<u64> = children.iter().map(|app| rss_kib(app.id())).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held_at_once = live_permits(&cluster.lock().unwrap());
    tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
    let held_after_lease = live_permits(&cluster.lock().unwrap());
    for app in children {
        app.stop();
    }
    report(
        &seen,
        started.elapsed(),
        apps,
        &failovers,
        (held_at_once, held_after_lease),
        &rss_start,
        &rss_end,
    );
    Ok(())
}

async fn drive(
    client: reqwest::Client,
    addresses: Vec<String>,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    started: Instant,
) {
    while !stop.load(Ordering::Relaxed) {
        let app = &addresses[fastrand::usize(..addresses.len())];
        let key = fastrand::usize(..KEYS);
        let rate = fastrand::u8(..100) < 85;
        let url = format!("{app}/{}", if rate { "rate" } else { "slow" });
        let sent = started.elapsed();
        let answer = client
            .get(&url)
            .header("x-key", format!("key-{key}"))
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        let took = started.elapsed() - sent;
        let Ok(response) = answer else {
            seen.errors.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let status = response.status().as_u16();
        *seen.by_status.lock().unwrap().entry(status).or_default() += 1;
        if rate {
            seen.slowest_rate_us
                .fetch_max(took.as_micros() as u64, Ordering::Relaxed);
            if took > DEADLINE + SLACK {
                seen.past_deadline.fetch_add(1, Ordering::Relaxed);
            }
            if status == 200 {
                seen.admitted.lock().unwrap()[key].push(sent.as_micros() as u64);
            }
        }
    }
}

/// Concurrency permits whose lease has not ended, over every running primary.
fn live_permits(cluster: &RedisCluster) -> u64 {
    let mut live = 0;
    for index in cluster.primaries() {
        let node = cluster.node(index);
        let time = node.cli(&["TIME"]);
        let mut parts = time.lines();
        let (seconds, micros): (u64, u64) = (
            parts
                .next()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0),
            parts
                .next()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0),
        );
        let now = seconds * 1_000_000 + micros;
        for key in node.cli(&["--scan", "--pattern", "*:cc:*"]).lines() {
            let count: u64 = node
                .cli(&["ZCOUNT", key, &format!("({now}"), "+inf"])
                .parse()
                .unwrap_or(0);
            live += count;
        }
    }
    live
}

/// A process's resident memory in KiB, from `/proc`.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The most burst the admitted send times (µs, sorted) needed beyond `RATE`, replayed through an
/// exact GCRA without denials; only requests within `window` (µs) count when given.
fn excess(times: &[u64], window: Option<(u64, u64)>) -> i64 {
    let emission = 1_000_000.0 / f64::from(RATE);
    let (mut tat, mut needed) = (0.0_f64, 0_i64);
    for &at in times {
        if window.is_some_and(|(from, to)| at < from || at > to) {
            continue;
        }
        let at = at as f64;
        tat = tat.max(at) + emission;
        needed = needed.max(((tat - at) / emission).ceil() as i64);
    }
    needed - i64::from(RATE)
}

fn report(
    seen: &Seen,
    ran: Duration,
    apps: usize,
    failovers: &[Duration],
    (held_at_once, held_after_lease): (u64, u64),
    rss_start: &[u64],
    rss_end: &[u64],
) {
    let by_status = seen.by_status.lock().unwrap();
    let total: u64 = by_status.values().sum();
    let fives: u64 = by_status
        .iter()
        .filter(|(status, _)| **status >= 500)
        .map(|(_, count)| count)
        .sum();
    let mut statuses: Vec<_> = by_status.iter().collect();
    statuses.sort();
    let mut admitted = seen.admitted.lock().unwrap();
    for times in admitted.iter_mut() {
        times.sort_unstable();
    }
    let overall = admitted.iter().map(|t| excess(t, None)).max().unwrap_or(0);
    let around: Vec<String> = failovers
        .iter()
        .map(|at| {
            let at = at.as_micros() as u64;
            let window = Some((at.saturating_sub(5_000_000), at + 20_000_000));
            let worst = admitted
                .iter()
                .map(|t| excess(t, window))
                .max()
                .unwrap_or(0);
            format!("{}s: {}", at / 1_000_000, worst.max(0))
        })
        .collect();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| length | {} s, {apps} app processes, {CLIENTS} client tasks |",
        ran.as_secs()
    );
    println!(
        "| failovers (primary killed at) | {} |",
        failovers
            .iter()
            .map(|at| format!("{}s", at.as_secs()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| requests answered | {total} ({} per second) |",
        total / ran.as_secs().max(1)
    );
    println!(
        "| by status | {} |",
        statuses
            .iter()
            .map(|(s, c)| format!("{s}: {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("| 5xx (fail open: must be 0) | {fives} |");
    println!(
        "| client errors (no answer within 5 s) | {} |",
        seen.errors.load(Ordering::Relaxed)
    );
    println!(
        "| `/rate` answers past the deadline + 50 ms (must be 0) | {} (slowest {} ms) |",
        seen.past_deadline.load(Ordering::Relaxed),
        seen.slowest_rate_us.load(Ordering::Relaxed) / 1000
    );
    println!(
        "| concurrency permits held after the load: at once / after a lease (must be 0) | {held_at_once} / {held_after_lease} |"
    );
    println!(
        "| app RSS after warm-up → end (KiB) | {} |",
        rss_start
            .iter()
            .zip(rss_end)
            .map(|(a, b)| format!("{a} → {b}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| over-admission: most burst any key needed beyond 20, whole run | {} |",
        overall.max(0)
    );
    println!(
        "| … within 5 s before to 20 s after each kill | {} |",
        around.join(", ")
    );
}
