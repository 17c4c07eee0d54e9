//! Run with: cargo bench --bench scaling [-- --quick] [-- path.svg]
//!
//! How the cost of rate limiting grows with the work, measured on this machine and drawn into
//! `docs/scaling.svg`:
//!
//! 1. the cost of one decision against the number of live keys (1 to 10^6; 10^5 with `--quick`),
//!    for the memory store and the Redis store ([`keys`]);
//! 2. the Redis memory one client key costs under each algorithm: the numbers
//!    `cargo bench --bench memory_usage` printed into `docs/algorithms.md`, read from there, next
//!    to the whole server's memory growth per live GCRA key measured in step 1 ([`memory`]);
//! 3. requests per second against the number of app processes sharing one Redis (1, 2 and 4
//!    axum apps with `RateLimitLayer` on a `RedisStore`), driven by the load generator of
//!    `cargo bench --bench http` ([`instances`]).
//!
//! Starts its own `redis-server` on a free port (it must be on PATH) and its app processes (this
//! program again, with `--serve`), and stops them when done. Prints every number it draws. The
//! SVG is written by hand, as the other charts' (no plotting or font dependency). About two
//! minutes; `--quick` takes about half a minute.

mod chart;
mod instances;
mod keys;
mod memory;

use std::process::ExitCode;

use testkit::load;
use testkit::{BoxError, RedisServer};

fn main() -> ExitCode {
    let args = testkit::args();
    let result = match args.as_slice() {
        [serve, url] if serve == "--serve" => instances::serve(url),
        _ => run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scaling: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), BoxError> {
    let quick = args.iter().any(|arg| arg == "--quick");
    let path = args
        .iter()
        .find(|arg| !arg.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scaling.svg").to_owned());
    if let Some(unknown) = args
        .iter()
        .find(|arg| arg.starts_with("--") && *arg != "--quick")
    {
        return Err(format!("unknown option {unknown} (only --quick, and a path)").into());
    }

    let load_before = load::load_average();
    let redis = RedisServer::try_start()?;
    // The app processes first, on an empty Redis: the key sweep leaves up to 10^6 keys behind.
    eprintln!("scaling: requests/s against app instances");
    let instances = instances::measure(&redis.url(), quick)
        .map_err(|err| format!("measuring app instances: {err}"))?;
    eprintln!("scaling: decision cost against live keys");
    let keys = keys::measure(&redis.url(), quick)
        .map_err(|err| format!("measuring decisions against live keys: {err}"))?;
    drop(redis);
    let memory = memory::per_key()?;
    keys::print(&keys);
    memory::print(&memory);
    instances::print(&instances);

    let cores = std::thread::available_parallelism().map_or(0, |cores| cores.get());
    let mut machine = format!("{cores} cores shared by the load generator, the apps and Redis");
    if let (Some(before), Some(after)) = (load_before, load::load_average()) {
        machine.push_str(&format!(
            "; load average {before:.1} before, {after:.1} after"
        ));
    }
    println!("\n{machine}");
    let svg = chart::draw(&keys, &memory, &instances, &machine)?;
    std::fs::write(&path, svg).map_err(|err| format!("could not write {path}: {err}"))?;
    println!("\nwrote {path}");
    Ok(())
}
