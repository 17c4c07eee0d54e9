//! The gateway against nginx, whole HTTP requests: `cargo bench -p tower-redis-ratelimit-gateway
//! --bench gateway`.
//!
//! Starts a small upstream (hyper, on a runtime of its own in this process), a private
//! `redis-server`, nginx as a reverse proxy to the upstream (the reference: its own
//! configuration in a temporary directory, as many workers as the proxy has threads, keep-alive
//! to the upstream), and `ratelimit-gateway proxy` processes (the release binary cargo built for
//! this benchmark) in each mode of [`modes::Mode`]. The load generator ([`testkit::load`]) keeps
//! N keep-alive connections busy against one target at a time.
//!
//! The modes are interleaved: each round gives every mode one slice, starting with a different
//! mode each round, so the machine's noise falls on every mode alike. Before the rounds, each
//! target takes an unmeasured warm-up slice.
//!
//! Settings, from the environment:
//! - `GATEWAY_BENCH_SECONDS`: the length of one slice (default 3);
//! - `GATEWAY_BENCH_ROUNDS`: how many rounds (default 5);
//! - `GATEWAY_BENCH_CONNECTIONS`: concurrent connections (default 32);
//! - `GATEWAY_BENCH_WORKERS`: nginx's workers and the gateway's (`connections.workers`; default: the cores);
//! - `GATEWAY_BENCH_MODES`: the modes to run, by short name, comma-separated (default: all):
//!   `direct`, `nginx`, `proxy-memory`, `proxy-redis`, `proxy-refusing`, `serve`. E.g.
//!   `GATEWAY_BENCH_MODES=nginx,serve` measures what `serve` adds to nginx's requests alone.

mod modes;
mod report;
mod upstream;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use testkit::load::{self, Load, drive};
use testkit::{BoxError, RedisServer, env_or};

use crate::modes::{Mode, Target};
use testkit::load::Measured;

/// Each target's unmeasured first slice.
const WARM_UP: Duration = Duration::from_millis(500);

/// Distinct `x-key` values the load generator cycles through.
const KEYS: usize = 10_000;

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and should not start a
    // minutes-long run (nor need nginx and Redis).
    if !testkit::run_by_cargo_bench("gateway") {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("benches/gateway: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The run's settings, read from the environment.
pub(crate) struct Settings {
    slice: Duration,
    rounds: usize,
    connections: usize,
    pub(crate) workers: usize,
    modes: Vec<Mode>,
}

impl Settings {
    fn from_env() -> Result<Self, BoxError> {
        let seconds: f64 = env_or("GATEWAY_BENCH_SECONDS", 3.0)?;
        let slice = Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|slice| !slice.is_zero())
            .ok_or("GATEWAY_BENCH_SECONDS must be a positive number of seconds")?;
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        let settings = Self {
            slice,
            rounds: env_or("GATEWAY_BENCH_ROUNDS", 5)?,
            connections: env_or("GATEWAY_BENCH_CONNECTIONS", 32)?,
            workers: env_or("GATEWAY_BENCH_WORKERS", cores)?,
            modes: modes_from_env()?,
        };
        if settings.rounds == 0 || settings.connections == 0 || settings.workers == 0 {
            return Err("rounds, connections and workers must be at least 1".into());
        }
        Ok(settings)
    }
}

/// The modes `GATEWAY_BENCH_MODES` names, in the report's order; all when it is not set.
fn modes_from_env() -> Result<Vec<Mode>, BoxError> {
    let Ok(names) = std::env::var("GATEWAY_BENCH_MODES") else {
        return Ok(Mode::ALL.to_vec());
    };
    let names: Vec<&str> = names.split(',').map(str::trim).collect();
    if let Some(unknown) = names
        .iter()
        .find(|name| !Mode::ALL.iter().any(|mode| mode.key() == **name))
    {
        let known: Vec<&str> = Mode::ALL.iter().map(|mode| mode.key()).collect();
        return Err(format!(
            "GATEWAY_BENCH_MODES: no mode {unknown:?}; the modes are {}",
            known.join(", ")
        )
        .into());
    }
    Ok(Mode::ALL
        .into_iter()
        .filter(|mode| names.contains(&mode.key()))
        .collect())
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let load_before = load::load_average();
    let upstream = upstream::start()?;
    // Only the Redis mode needs a server.
    let redis = if settings.modes.contains(&Mode::ProxyRedis) {
        Some(RedisServer::try_start()?)
    } else {
        None
    };
    let redis_url = redis.as_ref().map(RedisServer::url);
    let keys: Arc<[HeaderValue]> = (0..KEYS)
        .map(|i| HeaderValue::from_str(&format!("client-{i}")))
        .collect::<Result<Vec<_>, _>>()?
        .into();
    let mut targets = Vec::new();
    for &mode in &settings.modes {
        let target = Target::start(mode, &settings, upstream.addr, redis_url.as_deref())?;
        targets.push((target, Measured::new(mode)?));
    }
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let load_for = |target: &Target, duration: Duration| Load {
        targets: vec![target.addr],
        connections: settings.connections,
        duration,
        keys: Arc::clone(&keys),
    };
    eprintln!(
        "benches/gateway: {} modes, {} rounds of {:?} slices, {} connections, {} workers; warming up",
        targets.len(),
        settings.rounds,
        settings.slice,
        settings.connections,
        settings.workers,
    );
    for (target, measured) in &targets {
        client
            .block_on(drive(&load_for(target, WARM_UP)))
            .map_err(|err| format!("{}: {err}", measured.mode.name()))?;
    }
    let modes = targets.len();
    for round in 0..settings.rounds {
        eprintln!(
            "benches/gateway: round {} of {}",
            round + 1,
            settings.rounds
        );
        for offset in 0..modes {
            let (target, measured) = &mut targets[(round + offset) % modes];
            let slice = client
                .block_on(drive(&load_for(target, settings.slice)))
                .map_err(|err| format!("{}: {err}", measured.mode.name()))?;
            measured.add(&slice)?;
        }
    }
    let load_after = load::load_average();
    report::print(
        &settings_line(&settings, load_before, load_after),
        targets.into_iter().map(|(_, measured)| measured).collect(),
    );
    Ok(())
}

fn settings_line(settings: &Settings, before: Option<f64>, after: Option<f64>) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |cores| cores.get());
    let load = match (before, after) {
        (Some(before), Some(after)) => {
            format!("; load average {before:.2} before, {after:.2} after")
        }
        _ => String::new(),
    };
    let modes = match std::env::var("GATEWAY_BENCH_MODES") {
        Ok(modes) => format!("GATEWAY_BENCH_MODES={modes} "),
        Err(_) => String::new(),
    };
    format!(
        "{modes}cargo bench -p tower-redis-ratelimit-gateway --bench gateway: {} rounds × {:?} per \
         mode, {} connections, {} keys, nginx's and the gateway's workers {}, {cores} cores{load}",
        settings.rounds, settings.slice, settings.connections, KEYS, settings.workers
    )
}
