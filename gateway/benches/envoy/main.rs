//! Envoy's rate limit service under load: `cargo bench -p tower-redis-ratelimit-gateway --bench
//! envoy`.
//!
//! A gRPC load generator (tonic over HTTP/2: a few connections, many requests in flight on
//! each, each request's latency into an HDR histogram) drives `ShouldRateLimit` against
//! servers started in this process, one per mode of [`modes::Mode`]: the service with the
//! in-process store and with Redis (a private `redis-server`), one descriptor and three per
//! request, mostly allowed and mostly denied; beside two floors, a bare tonic handler that
//! answers OK without limiting, and the same handler making one raw `EVALSHA` per request.
//!
//! The servers run on a runtime of their own (`ENVOY_BENCH_WORKERS` threads), the generator on
//! another thread. The modes are interleaved: each round gives every mode one slice, starting
//! with a different mode each round, so the machine's noise falls on every mode alike; each
//! mode first takes an unmeasured warm-up slice. Around each slice of a mode that reaches
//! Redis, Redis's `INFO commandstats` is read: the script calls it ran and the time they took,
//! per request (Redis is one thread: its time per decision is what a Redis-bound deployment
//! runs out of).
//!
//! Settings, from the environment:
//! - `ENVOY_BENCH_SECONDS`: the length of one slice (default 2);
//! - `ENVOY_BENCH_ROUNDS`: how many rounds (default 3);
//! - `ENVOY_BENCH_CONNECTIONS`: HTTP/2 connections (default 4);
//! - `ENVOY_BENCH_IN_FLIGHT`: requests in flight on each connection (default 16);
//! - `ENVOY_BENCH_WORKERS`: the servers' threads (default: the cores).

mod generator;
mod modes;
mod report;
mod run;
mod service;
mod serving;
mod workload;

use std::process::ExitCode;
use std::time::Duration;

use testkit::load::Measured;
use testkit::{BoxError, RedisServer};

use crate::generator::drive;
use crate::modes::{Mode, Server};
use crate::report::RedisCost;
use crate::run::Settings;

/// Each mode's unmeasured first slice.
const WARM_UP: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    run::main("envoy", run)
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let load_before = testkit::load::load_average();
    let redis = RedisServer::try_start()?;
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.workers)
        .enable_all()
        .build()?;
    let mut targets = Vec::new();
    for mode in Mode::ALL {
        let server = servers.block_on(Server::start(mode, &redis.url()))?;
        targets.push((server, Measured::new(mode)?));
    }
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    settings.announce("envoy", targets.len());
    let slice = |server: &Server, duration| {
        let mode = server.mode;
        client.block_on(drive(
            server.served.addr,
            move |n| mode.request(n),
            settings.connections,
            settings.in_flight,
            duration,
        ))
    };
    for (server, _) in &targets {
        slice(server, WARM_UP)?;
    }
    let mut stats = client.block_on(testkit::commands::connect(&redis.url()))?;
    let mut read_stats = || client.block_on(testkit::commands::command_calls(&mut stats));
    let modes = targets.len();
    let mut costs = vec![RedisCost::default(); modes];
    for round in 0..settings.rounds {
        eprintln!("benches/envoy: round {} of {}", round + 1, settings.rounds);
        for offset in 0..modes {
            let index = (round + offset) % modes;
            let (server, measured) = &mut targets[index];
            let before = read_stats()?;
            let outcome = slice(server, settings.slice)?;
            let after = read_stats()?;
            if server.mode.uses_redis() {
                let calls = testkit::commands::Calls::between(&before, &after);
                costs[index].add(&calls, outcome.requests());
            }
            measured.add(&outcome)?;
        }
    }
    let line = settings.line("envoy", load_before);
    report::print(
        &line,
        targets.into_iter().map(|(_, measured)| measured).collect(),
        &costs,
    );
    drop(servers);
    Ok(())
}
