//! One domain of Envoy's rate limit service on a Redis Cluster of one primary and of three:
//! `cargo bench -p tower-redis-ratelimit-gateway --bench envoy-cluster`.
//!
//! The question: does a domain's throughput grow with the primaries when Redis is the
//! bottleneck? Under `per_descriptor` placement each descriptor's counter has a slot of its
//! own, so one domain's counters spread over every primary; under `all_or_nothing` every
//! counter of the domain carries the domain as its hash tag, one slot, one primary, whatever the
//! cluster's size. The requests are Redis-bound: three descriptors each, every one of them one
//! of 10,000 values (no hot key for a batch to gather), limits that admit everything.
//!
//! The clusters are started by the benchmark (`redis-server` processes on free ports, no
//! replicas: a replica would take a core from the primaries). The servers, one per mode, run on a
//! runtime of their own, the load generator of the `envoy` benchmark on another thread, modes
//! interleaved round by round as there (each mode first takes an unmeasured warm-up slice).
//! Around each slice, every primary's `INFO cpu` and `INFO commandstats` are read: Redis's CPU
//! time per request, summed over the primaries, the busiest primary's share of it, and so the
//! domain's ceiling when Redis is the bottleneck (the requests per second the busiest primary
//! would serve with a core of its own). On a machine with fewer cores than the primaries, the
//! service and the generator, the requests per second cannot grow with the primaries however
//! the load spreads: the ceiling says what the spread buys.
//!
//! Settings, from the environment, as the `envoy` benchmark's: `ENVOY_BENCH_SECONDS` (a slice,
//! default 2), `ENVOY_BENCH_ROUNDS` (default 3), `ENVOY_BENCH_CONNECTIONS` (default 4),
//! `ENVOY_BENCH_IN_FLIGHT` (per connection, default 16), `ENVOY_BENCH_WORKERS` (the servers'
//! threads, default the cores).

#[path = "../envoy/generator.rs"]
mod generator;
#[path = "../envoy/run.rs"]
mod run;
#[path = "../envoy/service.rs"]
mod service;
#[path = "../envoy/serving.rs"]
mod serving;

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use testkit::BoxError;
use testkit::cluster::RedisCluster;
use testkit::commands::{Calls, CommandStat};
use testkit::load::{Measured, ratio};
use tower_redis_ratelimit::deadpool_redis::redis::aio::MultiplexedConnection;

use crate::generator::drive;
use crate::run::Settings;
use crate::serving::Served;

/// Each mode's unmeasured first slice.
const WARM_UP: Duration = Duration::from_millis(500);

/// Values of each descriptor.
const VALUES: u64 = 10_000;

/// One run's server: a cluster's size and the domain's placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mode {
    primaries: usize,
    placement: &'static str,
}

const MODES: [Mode; 4] = [
    Mode {
        primaries: 1,
        placement: "per_descriptor",
    },
    Mode {
        primaries: 3,
        placement: "per_descriptor",
    },
    Mode {
        primaries: 1,
        placement: "all_or_nothing",
    },
    Mode {
        primaries: 3,
        placement: "all_or_nothing",
    },
];

impl Mode {
    fn name(self) -> String {
        let primaries = if self.primaries == 1 {
            "primary"
        } else {
            "primaries"
        };
        format!("{} {primaries}, {}", self.primaries, self.placement)
    }

    /// The domain's file: three limits that admit everything.
    fn rules(self) -> String {
        let limit = "rate_limit: { unit: hour, requests_per_unit: 1000000000 }";
        format!(
            "domain: spread\nextensions: {{ store: cluster, placement: {} }}\ndescriptors:\n  - key: user\n    \
             {limit}\n  - key: route\n    {limit}\n  - key: tenant\n    {limit}\n",
            self.placement
        )
    }
}

/// The `n`th request: three descriptors, each one of [`VALUES`] values, in no step with one
/// another.
fn request(n: u64) -> RateLimitRequest {
    let entries = [
        ("user", n % VALUES),
        ("route", (n * 7 + 3) % VALUES),
        ("tenant", (n * 13 + 5) % VALUES),
    ];
    RateLimitRequest {
        domain: "spread".to_owned(),
        descriptors: entries
            .iter()
            .map(|(key, value)| RateLimitDescriptor {
                entries: vec![Entry {
                    key: (*key).to_owned(),
                    value: format!("{key}-{value}"),
                }],
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

fn main() -> ExitCode {
    run::main("envoy-cluster", run)
}

/// What a mode's requests cost the primaries of its cluster.
#[derive(Clone, Debug, Default)]
struct RedisCost {
    requests: u64,
    /// CPU time, seconds, per primary.
    cpu: Vec<f64>,
    /// Script and function calls, every primary's.
    calls: u64,
}

impl RedisCost {
    /// Adds a slice of `requests`, between the primaries' readings `before` and `after`.
    fn add(&mut self, requests: u64, before: &[Reading], after: &[Reading]) {
        self.requests += requests;
        self.cpu.resize(before.len(), 0.0);
        for (node, (before, after)) in before.iter().zip(after).enumerate() {
            self.cpu[node] += after.cpu - before.cpu;
            self.calls += Calls::between(&before.commands, &after.commands).scripts;
        }
    }

    /// The requests per second the busiest primary could serve, all its CPU given to them:
    /// the domain's ceiling when Redis is the bottleneck.
    fn ceiling(&self) -> f64 {
        let busiest = self.cpu.iter().copied().fold(0.0, f64::max);
        if busiest > 0.0 {
            self.requests as f64 / busiest
        } else {
            0.0
        }
    }
}

/// A primary's counters: its commands (`INFO commandstats`) and the CPU time its process has
/// used ([`testkit::commands::used_cpu`]).
struct Reading {
    commands: HashMap<String, CommandStat>,
    cpu: f64,
}

async fn read(connection: &mut MultiplexedConnection) -> Result<Reading, BoxError> {
    Ok(Reading {
        commands: testkit::commands::command_calls(connection).await?,
        cpu: testkit::commands::used_cpu(connection).await?,
    })
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let load_before = testkit::load::load_average();
    let clusters = [
        RedisCluster::start_primaries(1),
        RedisCluster::start_primaries(3),
    ];
    let cluster_of = |mode: Mode| &clusters[usize::from(mode.primaries != 1)];
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.workers)
        .enable_all()
        .build()?;
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut targets = Vec::new();
    for mode in MODES {
        let cluster = cluster_of(mode);
        let nodes: Vec<String> = cluster
            .urls()
            .iter()
            .map(|url| format!("{url:?}"))
            .collect();
        let stores = format!(
            "[stores.cluster]\ntype = \"cluster\"\nnodes = [{}]\n",
            nodes.join(", ")
        );
        let rules = mode.rules();
        let served = servers.block_on(Served::rules(&[("spread.yaml", &rules)], &stores))?;
        let mut stats = Vec::new();
        for url in cluster.urls() {
            stats.push(client.block_on(testkit::commands::connect(&url))?);
        }
        targets.push((
            mode,
            served,
            stats,
            Measured::new(mode)?,
            RedisCost::default(),
        ));
    }
    settings.announce("envoy-cluster", targets.len());
    let slice = |served: &Served, duration| {
        client.block_on(drive(
            served.addr,
            request,
            settings.connections,
            settings.in_flight,
            duration,
        ))
    };
    for (_, served, ..) in &targets {
        slice(served, WARM_UP)?;
    }
    let modes = targets.len();
    for round in 0..settings.rounds {
        eprintln!(
            "benches/envoy-cluster: round {} of {}",
            round + 1,
            settings.rounds
        );
        for offset in 0..modes {
            let (_, served, stats, measured, cost) = &mut targets[(round + offset) % modes];
            let read_all = |stats: &mut Vec<_>| -> Result<Vec<Reading>, BoxError> {
                stats
                    .iter_mut()
                    .map(|stats| client.block_on(read(stats)))
                    .collect()
            };
            let before = read_all(stats)?;
            let outcome = slice(served, settings.slice)?;
            let after = read_all(stats)?;
            cost.add(outcome.requests(), &before, &after);
            measured.add(&outcome)?;
        }
    }
    println!();
    println!("{}", settings.line("envoy-cluster", load_before));
    println!();
    println!(
        "| mode | requests/s | per round | p50 µs | p99 µs | over limit | errors | ÷ 1 primary | Redis CPU µs / request | busiest primary's share | Redis ceiling, requests/s | ÷ 1 primary | script calls / request |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let on_one = |mode: Mode| {
        targets.iter().find(|(other, ..)| {
            *other
                == Mode {
                    primaries: 1,
                    ..mode
                }
        })
    };
    for (mode, _, _, measured, cost) in &targets {
        let (one_rate, one_ceiling) = on_one(*mode).map_or((0.0, 0.0), |(.., one, cost)| {
            (one.rounds.total.per_second(), cost.ceiling())
        });
        let requests = cost.requests.max(1) as f64;
        let total: f64 = cost.cpu.iter().sum();
        let busiest = cost.cpu.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {} | {} | {:.1} | {} | {:.0} | {} | {:.2} |",
            mode.name(),
            measured.rounds.cells(),
            ratio(measured.rounds.total.per_second(), one_rate),
            total * 1e6 / requests,
            ratio(busiest, total),
            cost.ceiling(),
            ratio(cost.ceiling(), one_ceiling),
            cost.calls as f64 / requests,
        );
    }
    println!();
    println!(
        "requests/s: all rounds' requests over their time; per round: the lowest and highest \
         round; ÷ 1 primary: over the same placement's on one primary (target: per_descriptor \
         on 3 ≥ 2 when Redis is the bottleneck); Redis CPU µs / request: the CPU time of every \
         primary's process (`INFO cpu`) over the requests; busiest primary's share: of that \
         time (0.33 is an even spread over three); Redis ceiling: the requests per second the \
         busiest primary would serve with a core of its own (the requests over its CPU \
         seconds), the domain's throughput when Redis is the bottleneck; script calls / \
         request: FCALL and EVALSHA calls, every primary's, over the requests."
    );
    drop(servers);
    Ok(())
}
