//! The gRPC load generator: `connections` HTTP/2 connections (tonic channels), each with
//! `in_flight` requests outstanding at any time, closed loop, until the slice is over. Each
//! request's latency, from just before it is sent to its answer, goes into an HDR histogram
//! (microseconds, 3 significant digits). Then the table of the run.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use testkit::BoxError;
use testkit::load::{Measured, Outcome, ratio};
use tonic::transport::Endpoint;

use crate::modes::Mode;

/// A request that takes longer than this fails the run instead of hanging it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Drives `addr` as `mode` asks for one slice of `duration`.
pub(crate) async fn drive(
    addr: SocketAddr,
    mode: Mode,
    connections: usize,
    in_flight: usize,
    duration: Duration,
) -> Result<Outcome, BoxError> {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let mut loops = Vec::with_capacity(connections * in_flight);
    for _ in 0..connections {
        let channel = Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect()
            .await?;
        for _ in 0..in_flight {
            let mut client = RateLimitServiceClient::new(channel.clone());
            let next = Arc::clone(&next);
            loops.push(tokio::spawn(async move {
                let mut outcome = Outcome::empty()?;
                while Instant::now() < deadline {
                    let request = mode.request(next.fetch_add(1, Ordering::Relaxed));
                    let sent = Instant::now();
                    let answer =
                        tokio::time::timeout(REQUEST_TIMEOUT, client.should_rate_limit(request))
                            .await
                            .map_err(|_| {
                                format!("{addr} did not answer within {REQUEST_TIMEOUT:?}")
                            })?;
                    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    outcome.latency.saturating_record(micros.max(1));
                    match answer.map(|answer| answer.into_inner().overall_code) {
                        Ok(code) if code == i32::from(Code::OverLimit) => outcome.denied += 1,
                        Ok(_) => outcome.ok += 1,
                        Err(_) => outcome.other += 1,
                    }
                }
                Ok::<_, BoxError>(outcome)
            }));
        }
    }
    let mut total = Outcome::empty()?;
    for one in loops {
        total.merge(&one.await??)?;
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// What a mode's requests cost Redis, from `INFO commandstats` around its slices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RedisCost {
    requests: u64,
    script_calls: u64,
    script_usec: u64,
}

impl RedisCost {
    pub(crate) fn add(&mut self, calls: &testkit::commands::Calls, requests: u64) {
        self.requests += requests;
        self.script_calls += calls.scripts;
        self.script_usec += calls.scripts_usec;
    }

    /// Redis's µs per request, and its script calls per request; `None` for a mode that does
    /// not reach Redis (no request counted).
    fn per_request(&self) -> Option<(f64, f64)> {
        (self.requests > 0).then(|| {
            let requests = self.requests as f64;
            (
                self.script_usec as f64 / requests,
                self.script_calls as f64 / requests,
            )
        })
    }
}

/// Prints the markdown table: requests/s, the rounds' range, p50 and p99, the share refused,
/// the ratio to the bare handler's requests/s and to one raw EVALSHA per request's, and, for a
/// mode that reaches Redis, Redis's time and script calls per request (`costs`, by row).
pub(crate) fn print(settings: &str, rows: Vec<Measured<Mode>>, costs: &[RedisCost]) {
    let rate_of = |name: &str| {
        rows.iter()
            .find(|row| row.mode.name() == name)
            .map_or(0.0, |row| row.rounds.total.per_second())
    };
    let bare = |descriptors| rate_of(Mode::Bare { descriptors }.name());
    let evalsha = rate_of(Mode::Evalsha.name());
    let evalsha_us = rows
        .iter()
        .zip(costs)
        .find(|(row, _)| row.mode == Mode::Evalsha)
        .and_then(|(_, cost)| cost.per_request())
        .map_or(0.0, |(us, _)| us);
    println!();
    println!("{settings}");
    println!();
    println!(
        "| mode | requests/s | per round | p50 µs | p99 µs | over limit | errors | ÷ bare | ÷ EVALSHA | Redis µs / request | ÷ EVALSHA's | script calls / request |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (row, cost) in rows.iter().zip(costs) {
        let rate = row.rounds.total.per_second();
        let redis = match cost.per_request() {
            Some((us, calls)) => format!("{us:.1} | {} | {calls:.2}", ratio(us, evalsha_us)),
            None => "– | – | –".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {redis} |",
            row.mode.name(),
            row.rounds.cells(),
            ratio(rate, bare(row.mode.descriptors())),
            ratio(rate, evalsha),
        );
    }
    println!();
    println!(
        "requests/s: all rounds' requests over their time; per round: the lowest and highest \
         round; over limit: OVER_LIMIT answers; errors: gRPC errors (none expected); ÷ bare: \
         over the bare handler's requests/s with as many descriptors per request (targets: \
         in-process ≥ 0.8, Redis mostly denied ≥ 0.8); ÷ EVALSHA: over one raw EVALSHA per \
         request (target: Redis mostly allowed, one descriptor, ≥ 1); Redis µs / request: the \
         `usec` of Redis's script calls (`INFO commandstats`, the commands they ran included) \
         over the requests, and ÷ EVALSHA's: over the raw EVALSHA's; script calls / request: \
         FCALL and EVALSHA calls over the requests (a batch decides several requests in one)."
    );
}
