//! Whole HTTP requests through each limiter, driven by a load generator of its own:
//! `cargo bench --bench http`.
//!
//! Starts a private `redis-server` on a free port, then one axum app per scenario and mode (see
//! [`modes`]), each on its own loopback port, all in this process on one multi-thread Tokio
//! runtime. The load generator ([`testkit::load`]) runs on a runtime of its own on the main thread
//! and keeps N keep-alive connections busy against one app at a time.
//!
//! The modes are interleaved: each round gives every scenario and mode one slice of a few seconds,
//! starting each round with a different mode, so that the machine's noise (other processes, CPU
//! frequency, Redis's own housekeeping) falls on every mode alike rather than on whichever ran
//! during a bad minute. Before the rounds, every app takes an unmeasured warm-up slice (connecting
//! to Redis, loading scripts, filling caches, and using the abusive key's burst).
//!
//! Redis commands are counted from `INFO commandstats` before and after each slice, on a
//! connection of the benchmark's own, so the table says how many round trips to Redis each
//! request cost.
//!
//! Settings, from the environment:
//! - `HTTP_BENCH_SECONDS`: the length of one slice (default 3);
//! - `HTTP_BENCH_ROUNDS`: how many rounds (default 4): with 4 scenarios and 11 modes, about ten
//!   minutes in all;
//! - `HTTP_BENCH_CONNECTIONS`: concurrent connections, so requests in flight (default 32);
//! - `HTTP_BENCH_MODES`, `HTTP_BENCH_SCENARIOS`: comma-separated names of the modes and scenarios
//!   to run (default: all), e.g. `HTTP_BENCH_MODES=none,governor,memory,memory-bare` for the
//!   in-process modes only; a ratio whose mode was not run prints as `-`.

mod floor;
mod modes;
mod report;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::runtime::Runtime;

use crate::modes::{Mode, SCENARIOS};
use crate::report::Measured;
use testkit::commands::{self, Calls, command_calls};
use testkit::load::{self, Load, drive};
use testkit::{BoxError, RedisServer, env_or};

/// Each app's unmeasured first slice.
const WARM_UP: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and should not start a
    // two-minute run (nor need Redis).
    if !testkit::run_by_cargo_bench("http") {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("benches/http: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The run's settings, read from the environment.
struct Settings {
    slice: Duration,
    rounds: usize,
    connections: usize,
    modes: Vec<Mode>,
    /// Indexes into `SCENARIOS`.
    scenarios: Vec<usize>,
}

impl Settings {
    fn from_env() -> Result<Self, BoxError> {
        let seconds: f64 = env_or("HTTP_BENCH_SECONDS", 3.0)?;
        let slice = Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|slice| !slice.is_zero())
            .ok_or("HTTP_BENCH_SECONDS must be a positive number of seconds")?;
        let rounds = env_or("HTTP_BENCH_ROUNDS", 4)?;
        let connections = env_or("HTTP_BENCH_CONNECTIONS", 32)?;
        if rounds == 0 || connections == 0 {
            return Err("HTTP_BENCH_ROUNDS and HTTP_BENCH_CONNECTIONS must be at least 1".into());
        }
        let modes = chosen("HTTP_BENCH_MODES", &Mode::ALL.map(Mode::name))?;
        let scenarios = chosen("HTTP_BENCH_SCENARIOS", &SCENARIOS.map(|s| s.name))?;
        Ok(Self {
            slice,
            rounds,
            connections,
            modes: modes.into_iter().map(|index| Mode::ALL[index]).collect(),
            scenarios,
        })
    }
}

/// The indexes, among `names`, of those the variable `name` lists (comma-separated), in the order
/// of `names`; all of them when it is unset.
fn chosen(name: &str, names: &[&str]) -> Result<Vec<usize>, BoxError> {
    let Ok(list) = std::env::var(name) else {
        return Ok((0..names.len()).collect());
    };
    let listed: Vec<&str> = list.split(',').map(str::trim).collect();
    if let Some(unknown) = listed.iter().find(|item| !names.contains(item)) {
        return Err(format!("{name}: unknown {unknown:?}, expected some of {names:?}").into());
    }
    Ok((0..names.len())
        .filter(|index| listed.contains(&names[*index]))
        .collect())
}

/// One app under test: a mode serving a scenario, on its own port.
struct App {
    scenario: usize,
    load: Load,
    measured: Measured,
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let load_before = load::load_average();
    let redis = RedisServer::try_start()?;
    let servers = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    let mut apps = Vec::new();
    for &index in &settings.scenarios {
        let scenario = &SCENARIOS[index];
        let keys: Arc<[_]> = scenario.keys()?.into();
        for &mode in &settings.modes {
            let router = servers.block_on(mode.router(scenario, &redis.url()))?;
            let address = serve(&servers, router)?;
            apps.push(App {
                scenario: index,
                load: Load {
                    targets: vec![address],
                    connections: settings.connections,
                    duration: settings.slice,
                    keys: Arc::clone(&keys),
                },
                measured: Measured::new(mode)?,
            });
        }
    }

    let mut counters = client.block_on(commands::connect(&redis.url()))?;
    eprintln!(
        "benches/http: {} apps, {} rounds of {:?} slices, {} connections; warming up",
        apps.len(),
        settings.rounds,
        settings.slice,
        settings.connections
    );
    for app in &apps {
        let warm_up = Load {
            duration: WARM_UP,
            targets: app.load.targets.clone(),
            keys: Arc::clone(&app.load.keys),
            ..app.load
        };
        client.block_on(drive(&warm_up))?;
    }

    let modes = settings.modes.len();
    for round in 0..settings.rounds {
        eprintln!("benches/http: round {} of {}", round + 1, settings.rounds);
        for scenario in 0..settings.scenarios.len() {
            // Each round starts with the next mode, so no mode always runs first or last.
            for offset in 0..modes {
                let app = &mut apps[scenario * modes + (round + offset) % modes];
                let (slice, calls) = client.block_on(async {
                    let before = command_calls(&mut counters).await?;
                    let slice = drive(&app.load).await?;
                    let after = command_calls(&mut counters).await?;
                    Ok::<_, BoxError>((slice, Calls::between(&before, &after)))
                })?;
                app.measured.add(&slice, calls)?;
            }
        }
    }

    let load = [load_before, load::load_average()];
    print_report(&settings, &redis, &client, apps, load)?;
    // Stops the apps (and their Redis connections) before the server goes.
    servers.shutdown_timeout(Duration::from_secs(1));
    drop(redis);
    Ok(())
}

/// Serves `router` on a free loopback port, on the servers' runtime.
fn serve(servers: &Runtime, router: axum::Router) -> Result<std::net::SocketAddr, BoxError> {
    let listener = servers.block_on(TcpListener::bind("127.0.0.1:0"))?;
    let address = listener.local_addr()?;
    servers.spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            eprintln!("benches/http: the app on {address} stopped: {err}");
        }
    });
    Ok(address)
}

fn print_report(
    settings: &Settings,
    redis: &RedisServer,
    client: &Runtime,
    apps: Vec<App>,
    load: [Option<f64>; 2],
) -> Result<(), BoxError> {
    let version: String = client.block_on(async {
        let mut connection = commands::connect(&redis.url()).await?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await?;
        Ok::<_, BoxError>(info)
    })?;
    let version = version
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown");
    let cores = std::thread::available_parallelism().map_or(0, |cores| cores.get());
    println!();
    let load = match load {
        [Some(before), Some(after)] => {
            format!("; load average {before:.2} before, {after:.2} after")
        }
        _ => String::new(),
    };
    println!(
        "cargo bench --bench http: {} rounds × {:?} per mode and scenario, {} connections, \
         {cores} cores, Redis {version} on loopback{load}",
        settings.rounds, settings.slice, settings.connections
    );
    for scenario in settings.scenarios.iter().map(|&index| &SCENARIOS[index]) {
        println!("- {}: {}", scenario.name, scenario.about);
    }
    println!();
    report::print_header();
    let mut rows: Vec<Vec<Measured>> = SCENARIOS.iter().map(|_| Vec::new()).collect();
    for app in apps {
        rows[app.scenario].push(app.measured);
    }
    for (scenario, rows) in SCENARIOS.iter().zip(&rows) {
        report::print_rows(scenario, rows);
    }
    println!();
    report::print_targets(&rows);
    println!();
    println!(
        "requests/s: all rounds' requests over their time; per round: the lowest and highest \
         round; ÷ none, ÷ floor: requests/s over that mode's in the same run; other status: \
         answers neither 2xx nor 429 (a failed-closed store call is a 503); calls/req: calls \
         of functions and scripts (FCALL, EVALSHA: round trips to Redis) per request; Redis \
         µs/req: Redis's own time in those calls per request (INFO commandstats usec); other \
         cmds/req: every other command Redis counted in INFO commandstats, which counts the \
         commands a function runs (TIME, GET, SET) as well."
    );
    Ok(())
}
