//! What the tests and the benchmarks of `tower-redis-ratelimit` share, so that each is written
//! once:
//!
//! - private Redis servers: a standalone [`RedisServer`], a [`cluster::RedisCluster`] and a
//!   [`sentinel::RedisSentinels`] set, each on free loopback ports, with saving off and in a
//!   temporary directory of its own, stopped and removed when dropped;
//! - [`tls`]: a test CA and its certificates, for servers that speak TLS alone;
//! - [`commands`]: how many commands a server ran, read on a connection of the caller's own;
//! - [`load`]: a closed-loop HTTP/1.1 load generator, and [`app_process`]: apps in processes of
//!   their own for it to drive;
//! - [`nginx::Nginx`]: a private nginx on a free port, for the gateway's tests and benchmark;
//! - [`peer`]: Caddy, Traefik and Envoy (installed by `.ci/install-gateways`) as processes;
//! - [`governor`]: tower_governor keyed as the benchmarks key ours, their in-process baseline;
//! - [`traces`]: seeded request traces for the algorithm studies;
//! - [`harness`]: tests in a binary without libtest's harness, answering `cargo test` alike;
//! - [`wan::WanLink`]: a link between regions on one machine, with latency, partitions and drops.
//!
//! It does not depend on the crate under test, so the crate's own unit tests may use it too.

pub mod app_process;
pub mod cluster;
pub mod commands;
pub mod governor;
pub mod harness;
pub mod load;
pub mod nginx;
pub mod peer;
pub mod sentinel;
mod server;
mod temp_dir;
pub mod tls;
pub mod traces;
pub mod wan;

pub use server::{RedisServer, find_binary, free_port};
pub use temp_dir::TempDir;

/// The program's arguments after its name, without the `--bench` that `cargo bench` appends to
/// those of a benchmark without a harness: a tool run as `cargo bench --bench NAME -- ARGS` sees
/// `ARGS`.
pub fn args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|arg| arg != "--bench")
        .collect()
}

/// Whether the benchmark `name` should measure: `cargo bench` passes `--bench`, which
/// `cargo test --benches` (checking that the benchmarks build and start) does not. In that case
/// it prints how to run the measurement, which may take minutes or need Redis, and says no.
pub fn run_by_cargo_bench(name: &str) -> bool {
    let run = std::env::args().any(|arg| arg == "--bench");
    if !run {
        println!("benches/{name} runs only under `cargo bench --bench {name}`");
    }
    run
}

/// Errors of a benchmark run: each says what failed in words a user can act on.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The number in the environment variable `name`, or `default` when it is not set: a
/// benchmark's settings. A value that does not parse is an error naming the variable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T, BoxError> {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .map_err(|_| format!("{name}={value:?} is not a valid number").into()),
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(err) => Err(format!("{name}: {err}").into()),
    }
}
