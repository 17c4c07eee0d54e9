//! The gRPC load generator: `connections` HTTP/2 connections (tonic channels), each with
//! `in_flight` requests outstanding at any time, closed loop, until the slice is over. Each
//! request's latency, from just before it is sent to its answer, goes into an HDR histogram
//! (microseconds, 3 significant digits). Shared by the benchmarks of the Envoy service (`envoy`,
//! `envoy-cluster`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use testkit::BoxError;
use testkit::load::Outcome;
use tonic::transport::Endpoint;

/// A request that takes longer than this fails the run instead of hanging it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Drives `addr` for one slice of `duration`, its `n`th request `request(n)`.
pub(crate) async fn drive<R>(
    addr: SocketAddr,
    request: R,
    connections: usize,
    in_flight: usize,
    duration: Duration,
) -> Result<Outcome, BoxError>
where
    R: Fn(u64) -> RateLimitRequest + Clone + Send + 'static,
{
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
            let request = request.clone();
            loops.push(tokio::spawn(async move {
                let mut outcome = Outcome::empty()?;
                while Instant::now() < deadline {
                    let asked = request(next.fetch_add(1, Ordering::Relaxed));
                    let sent = Instant::now();
                    let answer =
                        tokio::time::timeout(REQUEST_TIMEOUT, client.should_rate_limit(asked))
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
