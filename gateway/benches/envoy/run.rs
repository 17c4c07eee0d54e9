//! What every Envoy benchmark runs with: its settings, from the environment
//! (`ENVOY_BENCH_*`), its `main`, and the line that says what ran.

use std::process::ExitCode;
use std::time::Duration;

use testkit::{BoxError, env_or};

/// The `main` of the benchmark `bench`: `run` when `cargo bench` runs it (it passes `--bench`;
/// `cargo test --benches` does not, and should not start a long run, nor need Redis), its error
/// printed.
pub(crate) fn main(bench: &str, run: fn() -> Result<(), BoxError>) -> ExitCode {
    if !testkit::run_by_cargo_bench(bench) {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("benches/{bench}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The run's settings, read from the environment.
pub(crate) struct Settings {
    pub(crate) slice: Duration,
    pub(crate) rounds: usize,
    pub(crate) connections: usize,
    pub(crate) in_flight: usize,
    pub(crate) workers: usize,
}

impl Settings {
    pub(crate) fn from_env() -> Result<Self, BoxError> {
        let seconds: f64 = env_or("ENVOY_BENCH_SECONDS", 2.0)?;
        let slice = Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|slice| !slice.is_zero())
            .ok_or("ENVOY_BENCH_SECONDS must be a positive number of seconds")?;
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        let settings = Self {
            slice,
            rounds: env_or("ENVOY_BENCH_ROUNDS", 3)?,
            connections: env_or("ENVOY_BENCH_CONNECTIONS", 4)?,
            in_flight: env_or("ENVOY_BENCH_IN_FLIGHT", 16)?,
            workers: env_or("ENVOY_BENCH_WORKERS", cores)?,
        };
        if [
            settings.rounds,
            settings.connections,
            settings.in_flight,
            settings.workers,
        ]
        .contains(&0)
        {
            return Err(
                "rounds, connections, in-flight requests and workers must be at least 1".into(),
            );
        }
        Ok(settings)
    }

    /// What ran: the command, these settings, the cores, and the load average from
    /// `load_before` (read when the run started) to now.
    pub(crate) fn line(&self, bench: &str, load_before: Option<f64>) -> String {
        let cores = std::thread::available_parallelism().map_or(0, |cores| cores.get());
        let load = match (load_before, testkit::load::load_average()) {
            (Some(before), Some(after)) => {
                format!("; load average {before:.2} before, {after:.2} after")
            }
            _ => String::new(),
        };
        format!(
            "cargo bench -p tower-redis-ratelimit-gateway --bench {bench}: {} rounds × {:?} per \
             mode, {} connections × {} in flight, {} server threads, {cores} cores{load}",
            self.rounds, self.slice, self.connections, self.in_flight, self.workers
        )
    }

    /// Says on standard error that `bench` starts: its `modes`, and these settings.
    pub(crate) fn announce(&self, bench: &str, modes: usize) {
        eprintln!(
            "benches/{bench}: {modes} modes, {} rounds of {:?} slices, {} connections × {} in \
             flight, {} server threads; warming up",
            self.rounds, self.slice, self.connections, self.in_flight, self.workers,
        );
    }
}
