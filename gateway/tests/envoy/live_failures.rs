//! A real Envoy as gateway/docs/envoy.md configures it while `serve`'s Redis hangs (SIGSTOP) and then is
//! gone: `serve`'s `failure_mode` decides what the client gets, within the deadline, never
//! Envoy's `failure_mode_deny` (which would let every request through).

use std::time::{Duration, Instant};

use testkit::RedisServer;

use crate::front::{Front, Setup};
use crate::web::{get, header};

/// Far above the deadline (100 ms) and Envoy's timeout (0.25 s): a bound on a hang, not a
/// measurement.
const BOUND: Duration = Duration::from_secs(2);

/// GET `/api/x` from a client of its own, and how long the answer took.
async fn timed(front: &Front) -> (reqwest::Response, Duration) {
    let started = Instant::now();
    let response = get("127.0.0.2", &front.url("/api/x"), &[]).await;
    (response, started.elapsed())
}

/// Three requests refused with `429` and `Retry-After: 1`, each answered within [`BOUND`].
async fn refused_by_failing_closed(front: &Front, redis: &str) {
    for _ in 0..3 {
        let (response, took) = timed(front).await;
        assert_eq!(response.status(), 429, "Redis {redis}: {}", front.log());
        assert_eq!(header(&response, "retry-after"), "1", "Redis {redis}");
        // The answer of failure_mode: no limit was decided.
        assert_eq!(header(&response, "ratelimit"), "-", "Redis {redis}");
        assert!(took < BOUND, "Redis {redis}: {took:?}");
    }
}

/// Three requests served, each saying that limiting was skipped, within [`BOUND`].
async fn admitted_by_failing_open(front: &Front, redis: &str) {
    for _ in 0..3 {
        let (response, took) = timed(front).await;
        assert_eq!(response.status(), 200, "Redis {redis}: {}", front.log());
        // `serve` answered (Envoy failing open on its own would say nothing).
        assert_eq!(header(&response, "rate-limiting-state"), "Skipped");
        assert_eq!(response.text().await.unwrap(), "path /api/x");
        assert!(took < BOUND, "Redis {redis}: {took:?}");
    }
}

/// Admitted while Redis answers; then `check` while it hangs, and while it is gone.
async fn while_redis_fails<F>(setup: Setup, check: F)
where
    F: AsyncFn(&Front, &str),
{
    let mut redis = RedisServer::start();
    let front = Front::start(&redis, setup).await;
    let (admitted, _) = timed(&front).await;
    assert_eq!(admitted.status(), 200, "{}", front.log());
    assert_eq!(header(&admitted, "ratelimit"), "\"api\";r=19;t=60");
    redis.freeze();
    check(&front, "frozen").await;
    // SIGKILL ends the frozen process: connections refused from now on.
    redis.kill();
    check(&front, "killed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_closed_refuses_while_redis_hangs_and_when_it_is_gone() {
    let closed = Setup {
        failure_mode: "closed",
        ..Setup::DOCUMENTED
    };
    while_redis_fails(closed, refused_by_failing_closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_admits_while_redis_hangs_and_when_it_is_gone() {
    while_redis_fails(Setup::DOCUMENTED, admitted_by_failing_open).await;
}

/// Envoy's `timeout` equal to `serve`'s deadline (100 ms), as the page once said: Envoy sends it
/// as `grpc-timeout`, and `serve` answers within half of it, so failing closed still refuses
/// while Redis hangs instead of racing Envoy's own failure mode (which lets requests through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_closed_holds_with_an_envoy_timeout_no_longer_than_the_deadline() {
    let raced = Setup {
        failure_mode: "closed",
        envoy_timeout: Some("0.1s"),
        ..Setup::DOCUMENTED
    };
    while_redis_fails(raced, refused_by_failing_closed).await;
}
