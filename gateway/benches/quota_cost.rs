//! What the quota service costs per Envoy and per bucket: `cargo bench -p
//! tower-redis-ratelimit-gateway --bench quota_cost`.
//!
//! The `serve` binary (the one cargo built, run as a process) with one domain whose buckets
//! `{name: tenant, tenant: <t>}` each have a quota, its shares in process and then in a Redis of
//! the benchmark's own; `N` tonic clients stand in for Envoys (a stream each, on a connection
//! each), and each reports the same `M` buckets in every message, as a fleet of Envoys in front
//! of the same tenants does (N = 1, 10, 100; M = 1, 10, 100).
//!
//! Envoy reports every 5 s; here the reporting interval is compressed so that a run takes
//! seconds: the fleet's reports of a bucket come at `QUOTA_COST_RATE` a second in all
//! (default 8,000), each client every `N·M / rate` (from 125 µs for one Envoy of one bucket to
//! 1.25 s for 100 of 100). The time to live is 4 s, so no assignment is renewed while its
//! bucket is reported (a renewal is due 2 s after a settle); then the clients stay silent for
//! 3 s, in which every bucket is renewed (once or twice). A renewal's cost is printed where
//! there were 1,000 or more, and `serve`'s where they took ten ticks of the CPU clock or more.
//!
//! Around each phase: `serve`'s CPU time (`utime` + `stime` of `/proc/<pid>/stat`), its
//! counters (`gateway_quota_reports_total`, `gateway_quota_assignments_total` on `/metrics`: the
//! reports it processed, which a loaded machine may hold below the rate asked, and the
//! settles, each one store call), and Redis's `INFO commandstats` (its calls of scripts: round
//! trips; and every command, those a script runs included) and `INFO cpu`. Printed per report of a bucket and
//! per renewal: ratios, which hold on a shared machine where absolute rates do not.

#[allow(dead_code)]
#[path = "../tests/common/process.rs"]
mod process;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaUsageReports};
use testkit::commands::{Calls, CommandStat};
use testkit::{BoxError, RedisServer, TempDir, env_or};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tower_redis_ratelimit::deadpool_redis::redis::aio::MultiplexedConnection;

use crate::process::GatewayProcess;

/// The reports' phase, after a warm-up (the streams opened, every bucket's first settle).
const REPORTING: Duration = Duration::from_millis(2_500);
const WARM_UP: Duration = Duration::from_millis(600);
/// The silent phase: long enough for every bucket's renewal (2 s after its last settle, seen
/// at the stream's next 250 ms tick), reports still queued when the clients stopped included.
const SILENT: Duration = Duration::from_millis(3_000);
/// The least CPU time a cost is read from: ten ticks of the clock `/proc` counts in.
const LEAST_CPU_TICKS: f64 = 10.0;
const SIZES: [usize; 3] = [1, 10, 100];

fn main() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("quota_cost bench: {err}");
            ExitCode::FAILURE
        }
    }
}

/// What one phase cost.
#[derive(Clone, Copy, Debug, Default)]
struct Spent {
    /// Reports of a bucket `serve` processed.
    reports: f64,
    /// Assignments it sent: one settle (one store call) each.
    settles: f64,
    /// Its CPU time, in seconds.
    serve_cpu: f64,
    /// Script calls Redis ran: round trips.
    redis_calls: f64,
    /// Commands Redis ran, those of the scripts included, but the benchmark's `INFO`.
    redis_commands: f64,
    /// Redis's CPU time, in seconds.
    redis_cpu: f64,
    seconds: f64,
}

/// What is read around a phase.
struct Reading {
    at: Instant,
    reports: f64,
    settles: f64,
    serve_cpu: f64,
    redis: Option<(HashMap<String, CommandStat>, f64)>,
}

async fn run() -> Result<(), BoxError> {
    let rate: f64 = env_or("QUOTA_COST_RATE", 8_000.0)?;
    let ticks: f64 = String::from_utf8(
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()?
            .stdout,
    )?
    .trim()
    .parse()?;
    let load_before = testkit::load::load_average();
    let redis = RedisServer::start();
    let mut connection = testkit::commands::connect(&redis.url()).await?;
    println!(
        "quota_cost: {rate} reports of a bucket a second asked of the fleet, time to live 4 s"
    );
    println!(
        "| shares | Envoys | buckets each | reports/s done | serve µs per report | store calls per report | Redis calls per report | Redis commands per report | Redis µs per report | serve µs per renewal | Redis µs per renewal |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for in_redis in [false, true] {
        for envoys in SIZES {
            for buckets in SIZES {
                let redis = in_redis.then_some((&redis, &mut connection));
                let (reporting, silent) = measure(redis, envoys, buckets, rate, ticks).await?;
                let per = |total: f64, count: f64| {
                    if count > 0.0 {
                        format!("{:.1}", total * 1e6 / count)
                    } else {
                        "-".to_owned()
                    }
                };
                let redis_cell = |text: String| if in_redis { text } else { "-".to_owned() };
                // A renewal's cost is read only where the silent phase has enough of them
                // for the streams' idle ticks not to dominate, and, for `serve`, enough CPU
                // time for the clock's resolution.
                let renewals = if silent.settles >= 1_000.0 {
                    silent.settles
                } else {
                    0.0
                };
                let serve_renewals = if silent.serve_cpu * ticks >= LEAST_CPU_TICKS {
                    renewals
                } else {
                    0.0
                };
                println!(
                    "| {} | {envoys} | {buckets} | {:.0} | {} | {:.2} | {} | {} | {} | {} | {} |",
                    if in_redis { "Redis" } else { "in process" },
                    reporting.reports / reporting.seconds,
                    per(reporting.serve_cpu, reporting.reports),
                    reporting.settles / reporting.reports.max(1.0),
                    redis_cell(format!(
                        "{:.2}",
                        reporting.redis_calls / reporting.reports.max(1.0)
                    )),
                    redis_cell(format!(
                        "{:.2}",
                        reporting.redis_commands / reporting.reports.max(1.0)
                    )),
                    redis_cell(per(reporting.redis_cpu, reporting.reports)),
                    per(silent.serve_cpu, serve_renewals),
                    redis_cell(per(silent.redis_cpu, renewals)),
                );
            }
        }
    }
    println!(
        "load average (1 min): before {}, after {}",
        load_before.map_or("?".to_owned(), |load| format!("{load:.2}")),
        testkit::load::load_average().map_or("?".to_owned(), |load| format!("{load:.2}")),
    );
    Ok(())
}

/// One `serve` with `envoys` clients of `buckets` buckets each: what the reports' phase and
/// the silent phase cost.
async fn measure(
    redis: Option<(&RedisServer, &mut MultiplexedConnection)>,
    envoys: usize,
    buckets: usize,
    rate: f64,
    ticks: f64,
) -> Result<(Spent, Spent), BoxError> {
    let dir = TempDir::new("quota-cost")?;
    std::fs::create_dir(dir.path().join("rules"))?;
    let (store, stores) = match &redis {
        Some((server, _)) => (
            "  store: shared\n",
            format!(
                "[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\n",
                server.url()
            ),
        ),
        None => ("", String::new()),
    };
    std::fs::write(
        dir.path().join("rules").join("tenants.yaml"),
        format!(
            "domain: tenants\nextensions:\n{store}  quota_service:\n    assignment_ttl: 4s\n    \
             buckets:\n      - bucket: {{ name: tenant, tenant: \"*\" }}\n        limit: 1000\n        \
             period: 1s\n"
        ),
    )?;
    let admin = process::free_addr();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "{stores}\n[serve]\nlisten = \"127.0.0.1:0\"\nadmin = \"{admin}\"\n\n\
             [serve.envoy]\nfiles = \"rules\"\n"
        ),
    )?;
    let (serve, line, _stdout) = GatewayProcess::start("serve", &config, None);
    let addr = line
        .strip_prefix("serve: listening on ")
        .and_then(|rest| rest.split([' ', ',']).next())
        .ok_or_else(|| format!("no address in {line:?}"))?
        .to_owned();
    let pid = serve.child.id();
    let interval = Duration::from_secs_f64((envoys * buckets) as f64 / rate);
    let mut stops = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..envoys {
        let channel = Channel::from_shared(addr.clone())?
            .connect()
            .await
            .map_err(|err| format!("cannot connect to {addr}: {err:?}"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        clients.push(envoy(channel, buckets, interval, stopped));
        stops.push(stop);
    }
    tokio::time::sleep(WARM_UP).await;
    let mut redis = redis.map(|(_, connection)| connection);
    let start = read(pid, admin, redis.as_deref_mut(), ticks).await?;
    tokio::time::sleep(REPORTING).await;
    for stop in &stops {
        stop.send_replace(true);
    }
    let reported = read(pid, admin, redis.as_deref_mut(), ticks).await?;
    tokio::time::sleep(SILENT).await;
    let end = read(pid, admin, redis, ticks).await?;
    drop(stops);
    for client in clients {
        client.abort();
    }
    drop(serve);
    Ok((spent(&start, &reported), spent(&reported, &end)))
}

/// An Envoy's stream: `buckets` buckets reported every `interval` until `stop` (the
/// deadlines kept: a late report is sent at once), the answers read and dropped.
fn envoy(
    channel: Channel,
    buckets: usize,
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let (reports, receiver) = mpsc::channel::<RateLimitQuotaUsageReports>(4);
        let outgoing = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|report| (report, receiver))
        });
        let mut client = RateLimitQuotaServiceClient::new(channel);
        let reader = tokio::spawn(async move {
            let Ok(answers) = client.stream_rate_limit_quotas(outgoing).await else {
                return;
            };
            let mut answers = answers.into_inner();
            while let Ok(Some(_)) = answers.message().await {}
        });
        let report = RateLimitQuotaUsageReports {
            domain: "tenants".to_owned(),
            bucket_quota_usages: (0..buckets)
                .map(|tenant| BucketQuotaUsage {
                    bucket_id: Some(BucketId {
                        bucket: [
                            ("name".to_owned(), "tenant".to_owned()),
                            ("tenant".to_owned(), format!("t{tenant}")),
                        ]
                        .into(),
                    }),
                    time_elapsed: None,
                    num_requests_allowed: 5,
                    num_requests_denied: 0,
                })
                .collect(),
        };
        let mut next = tokio::time::Instant::now();
        while !*stop.borrow() {
            if reports.send(report.clone()).await.is_err() {
                break;
            }
            next += interval;
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                _ = stop.changed() => break,
            }
        }
        // The stream stays open, silent: its assignments are renewed.
        let _ = stop.changed().await;
        drop(reports);
        reader.abort();
    })
}

async fn read(
    pid: u32,
    admin: SocketAddr,
    redis: Option<&mut MultiplexedConnection>,
    ticks: f64,
) -> Result<Reading, BoxError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command's name (in parentheses, which may hold spaces): the
    // state is the third field of the line, utime the 14th and stime the 15th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .ok_or("no command name in /proc/<pid>/stat")?
        .1
        .split_whitespace()
        .collect();
    let field = |at: usize| -> Result<f64, BoxError> {
        Ok(fields.get(at - 3).ok_or("a short stat line")?.parse()?)
    };
    let serve_cpu = (field(14)? + field(15)?) / ticks;
    let metrics = reqwest::get(format!("http://{admin}/metrics"))
        .await?
        .text()
        .await?;
    let sum = |name: &str, label: &str| -> f64 {
        metrics
            .lines()
            .filter(|line| line.starts_with(name) && line.contains(label))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let redis = match redis {
        Some(connection) => Some((
            testkit::commands::command_calls(connection).await?,
            testkit::commands::used_cpu(connection).await?,
        )),
        None => None,
    };
    Ok(Reading {
        at: Instant::now(),
        reports: sum("gateway_quota_reports_total{", "domain=\"tenants\""),
        settles: sum("gateway_quota_assignments_total{", "action=\"assign\""),
        serve_cpu,
        redis,
    })
}

fn spent(before: &Reading, after: &Reading) -> Spent {
    let (redis_calls, redis_commands, redis_cpu) = match (&before.redis, &after.redis) {
        (Some((commands_before, cpu_before)), Some((commands_after, cpu_after))) => {
            let calls = Calls::between(commands_before, commands_after);
            (
                calls.scripts as f64,
                (calls.scripts + calls.other) as f64,
                cpu_after - cpu_before,
            )
        }
        _ => (0.0, 0.0, 0.0),
    };
    Spent {
        reports: after.reports - before.reports,
        settles: after.settles - before.settles,
        serve_cpu: after.serve_cpu - before.serve_cpu,
        redis_calls,
        redis_commands,
        redis_cpu,
        seconds: (after.at - before.at).as_secs_f64(),
    }
}
