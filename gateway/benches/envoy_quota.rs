//! Latency through a real Envoy (1.40) with the quota filter, with the per-request rate limit
//! filter, and with no limit: `cargo bench -p tower-redis-ratelimit-gateway --bench
//! envoy_quota`.
//!
//! Three Envoys, each of a file of `gateway/docs/envoy.md` with its addresses changed, in front
//! of one upstream in this process: the page's rate limit service file (`ShouldRateLimit` to
//! `serve` for every request), the page's quota service file (`rate_limit_quota`: each Envoy
//! decides from its assignment; its bucket header is the load generator's `x-key`), and the
//! same file without the quota filter. `serve` (in this process, the in-process store) reads
//! the page's rules with limits no request reaches, so every mode measures admitted requests.
//! testkit's closed-loop HTTP/1.1 generator drives each Envoy in turn, round after round,
//! each mode starting with an unmeasured warm-up slice.
//!
//! Settings, from the environment: `QUOTA_BENCH_SECONDS` (a slice, default 2),
//! `QUOTA_BENCH_ROUNDS` (default 3), `QUOTA_BENCH_CONNECTIONS` (default 8).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::any;
use http::HeaderValue;
use ratelimit_gateway::runtime::{Address, ShutdownTrigger};
use ratelimit_gateway::serve::Serve;
use testkit::load::{Load, Measured, drive, load_average};
use testkit::peer::{Peer, documented_block};
use testkit::{BoxError, TempDir, env_or};

const PAGE: &str = include_str!("../docs/envoy.md");

/// What stands between the client and the upstream.
#[derive(Clone, Copy, Debug)]
enum Mode {
    NoLimit,
    RateLimitService,
    QuotaService,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::NoLimit => "Envoy, no limit",
            Mode::RateLimitService => "Envoy, rate limit filter (a gRPC call per request)",
            Mode::QuotaService => "Envoy, quota filter (assignments)",
        }
    }
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("envoy_quota bench: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `text` with each `from` replaced by its `to`, each required to be there.
fn with(text: &str, replacements: &[(&str, String)]) -> Result<String, BoxError> {
    let mut text = text.to_owned();
    for (from, to) in replacements {
        if !text.contains(from) {
            return Err(format!("no {from:?} in the page's file").into());
        }
        text = text.replace(from, to);
    }
    Ok(text)
}

fn socket_address(addr: SocketAddr) -> String {
    format!("{{ address: {}, port_value: {} }}", addr.ip(), addr.port())
}

/// `file` without the HTTP filter named `filter` (up to the router, which stays).
fn without_filter(file: &str, filter: &str) -> Result<String, BoxError> {
    let start = file
        .find(&format!("          - name: {filter}\n"))
        .ok_or("no such filter")?;
    let end = file
        .find("          - name: envoy.filters.http.router\n")
        .ok_or("no router")?;
    Ok(format!("{}{}", &file[..start], &file[end..]))
}

async fn run() -> Result<(), BoxError> {
    let seconds: f64 = env_or("QUOTA_BENCH_SECONDS", 2.0)?;
    let rounds: usize = env_or("QUOTA_BENCH_ROUNDS", 3)?;
    let connections: usize = env_or("QUOTA_BENCH_CONNECTIONS", 8)?;
    let slice = Duration::from_secs_f64(seconds);

    let upstream = {
        let app = Router::new().fallback(any(|| async { "served" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    };

    // The page's rules, their limits out of reach.
    let dir = TempDir::new("quota-bench")?;
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules)?;
    let edge = documented_block(PAGE, "yaml", "# ratelimit/config/edge.yaml", &[])?;
    let edge = with(
        &edge,
        &[
            (
                "requests_per_unit: 50",
                "requests_per_unit: 1000000000".into(),
            ),
            (
                "requests_per_unit: 20",
                "requests_per_unit: 1000000000".into(),
            ),
        ],
    )?;
    std::fs::write(rules.join("edge.yaml"), edge)?;
    let tenants = documented_block(PAGE, "yaml", "# ratelimit/config/tenants.yaml", &[])?;
    // In process: no Redis in this benchmark.
    let tenants: String = tenants
        .lines()
        .filter(|line| !line.contains("store: shared"))
        .map(|line| format!("{line}\n"))
        .collect();
    let tenants = with(
        &tenants,
        &[
            ("limit: 20\n", "limit: 1000000000\n".into()),
            ("burst: 5\n", "burst: 1000000\n".into()),
        ],
    )?;
    std::fs::write(rules.join("tenants.yaml"), tenants)?;
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\n\n[serve.envoy]\nfiles = \"rules\"\n",
    )?;
    let (_trigger, shutdown) = ShutdownTrigger::new();
    let serve = Serve::bind(&config, shutdown).await?;
    let serve_addr = match serve.addresses()?.first() {
        Some(Address::Tcp(addr)) => *addr,
        other => return Err(format!("serve listens on {other:?}").into()),
    };
    tokio::spawn(serve.run());

    let rate_limit = documented_block(PAGE, "yaml", "name: ingress", &[])?;
    let quota = documented_block(PAGE, "yaml", "name: quota_ingress", &[])?;
    let quota = quota.replace("header_name: x-tenant", "header_name: x-key");
    let files = [
        (
            Mode::NoLimit,
            without_filter(&quota, "envoy.filters.http.rate_limit_quota")?,
        ),
        (Mode::RateLimitService, rate_limit),
        (Mode::QuotaService, quota),
    ];
    let mut envoys = Vec::new();
    for (mode, file) in files {
        let listen = SocketAddr::from(([127, 0, 0, 1], testkit::free_port()));
        let file = with(
            &file,
            &[
                (
                    "{ address: 0.0.0.0, port_value: 8080 }",
                    socket_address(listen),
                ),
                (
                    "{ address: 127.0.0.1, port_value: 3000 }",
                    socket_address(upstream),
                ),
            ],
        )?;
        let file = file.replace(
            "{ address: 127.0.0.1, port_value: 8081 }",
            &socket_address(serve_addr),
        );
        let envoy_dir = TempDir::new("quota-bench-envoy")?;
        std::fs::write(envoy_dir.path().join("envoy.yaml"), file)?;
        let args = [
            "-c",
            "envoy.yaml",
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "--log-level",
            "warning",
        ];
        let peer = Peer::start("envoy", &args, envoy_dir, listen)?;
        envoys.push((Measured::new(mode)?, listen, peer));
    }

    let keys: Arc<[HeaderValue]> = Arc::from(vec![HeaderValue::from_static("acme")]);
    let load = |target: SocketAddr, duration: Duration| Load {
        targets: vec![target],
        connections,
        duration,
        keys: Arc::clone(&keys),
    };
    for (_, target, _) in &envoys {
        drive(&load(*target, Duration::from_millis(500))).await?;
    }
    for _ in 0..rounds {
        for (measured, target, _) in &mut envoys {
            let outcome = drive(&load(*target, slice)).await?;
            measured.add(&outcome)?;
        }
    }
    println!(
        "| mode | requests/s | rounds | p50 µs | p99 µs | refused | other |\n|---|---|---|---|---|---|---|"
    );
    for (measured, _, _) in &envoys {
        println!("| {} | {} |", measured.mode.name(), measured.rounds.cells());
    }
    if let Some(load) = load_average() {
        println!(
            "(load average {load:.2} while it ran; {connections} connections, {rounds} rounds of {seconds} s)"
        );
    }
    Ok(())
}
