//! Run with: cargo bench -p tower-redis-ratelimit-gateway --bench envoy_cost --config
//! "target.'cfg(unix)'.runner = 'valgrind --tool=callgrind'" -- <what> <n> [prometheus]
//!
//! A tight loop of `n` `ShouldRateLimit` requests answered by Envoy's rate limit service on the
//! in-process store, for counting instructions, as `benches/cost.rs` counts the library's: the
//! requests and the limits are the `envoy` benchmark's in-process modes (`envoy/workload.rs`),
//! handed to the service's handler directly, without gRPC or HTTP/2 around them. Run at two `n`
//! and divide the difference of the counts by the difference of the `n`: loading the files,
//! making the requests (all of them made before the loop) and the clock's calibration drop out.
//! `docs/performance.md` ("Envoy's rate limit service") has the numbers.
//!
//! `<what>`: `1-allowed`, `3-allowed` (one descriptor, the user, or three: the user, a route
//! and a tenant; 10,000 users in turn under a billion an hour), `1-denied`, `3-denied` (16
//! users under one an hour on the user's descriptor, so all but the first request of each are
//! refused). With `prometheus`, a Prometheus recorder is installed first, as `serve` installs
//! one with an admin address: the metrics are then counted, where without a recorder (as in the
//! `envoy` benchmark) they are made and dropped.

#[path = "envoy/service.rs"]
mod service;
#[path = "envoy/workload.rs"]
mod workload;

use std::process::ExitCode;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use testkit::BoxError;

fn main() -> ExitCode {
    if !testkit::run_by_cargo_bench("envoy_cost") {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("benches/envoy_cost: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let mut args = testkit::args().into_iter();
    let what = args.next().unwrap_or_else(|| "1-allowed".to_owned());
    let n: u64 = args.next().map_or(Ok(100_000), |n| n.parse())?;
    let (descriptors, denied) = match what.as_str() {
        "1-allowed" => (1, false),
        "3-allowed" => (3, false),
        "1-denied" => (1, true),
        "3-denied" => (3, true),
        other => {
            let known = "1-allowed, 3-allowed, 1-denied or 3-denied";
            return Err(format!("unknown {other:?}: use {known}").into());
        }
    };
    match args.next().as_deref() {
        None => {}
        Some("prometheus") => {
            metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
        }
        Some(other) => return Err(format!("unknown {other:?}: use prometheus or nothing").into()),
    }
    let users = match denied {
        true => workload::DENIED_USERS,
        false => workload::ALLOWED_USERS,
    };
    let requests: Vec<_> = (0..users)
        .map(|user| workload::request(denied, descriptors, user))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (service, _files) = service::load(&workload::RULES, "")?;
    let admitted = runtime.block_on(async {
        let mut admitted = 0u64;
        for request in requests.iter().cycle().take(n as usize) {
            let answer = service.should_rate_limit(request).await?;
            admitted += u64::from(answer.overall_code == i32::from(Code::Ok));
        }
        Ok::<_, tonic::Status>(admitted)
    })?;
    println!("{admitted} of {n} admitted");
    Ok(())
}
