//! Headers on real time: the Redis store reads the server's clock, the memory store the system
//! clock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{Env, T0, app, assert_rounded_up, hello, request};
use crate::support::{RedisServer, header};
use axum::body::Body;
use http::Response;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::{MemoryStore, RedisStore, Store};

async fn real_time_headers(store: Arc<dyn Store>) {
    let env = Env {
        store,
        clock: ManualClock::new(T0),
        _redis: None,
    };
    let app = app(&env, &[hello()], HeaderFamilies::DEFAULT);
    let start = std::time::Instant::now();
    // The window starts with the first request, so it ends 10 s after a moment between the
    // system times read around that request. The store keeps its own time (the memory store
    // advances a monotonic clock from one wall-clock reading, Redis reads `TIME`): allow them a
    // few milliseconds of disagreement with this process's wall clock.
    let skew = Duration::from_millis(5);
    let mut window_end = None;
    for used in 1..=5u64 {
        let (response, before, after) = request(&app, &[]).await;
        let (earliest, latest) = *window_end.get_or_insert((
            before + Duration::from_secs(10) - skew,
            after + Duration::from_secs(10) + skew,
        ));
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string()
        );
        // Less than 10 s remain (at most 10 s for the first request), rounded up: 10.
        assert_eq!(
            header(&response, "ratelimit"),
            format!(r#""hello";r={};t=10"#, 5 - used)
        );
        assert_window_end(&response, earliest, latest);
    }
    let (earliest, latest) = window_end.unwrap();
    let (response, _, _) = request(&app, &[]).await;
    let elapsed = start.elapsed();
    assert_eq!(response.status(), 429);
    let retry: u64 = header(&response, "retry-after").parse().unwrap();
    // The rest of the window, rounded up: 10 s minus what has passed since the first request.
    let lowest = (Duration::from_secs(10) - elapsed).as_secs();
    assert!((lowest..=10).contains(&retry), "{retry} after {elapsed:?}");
    assert_window_end(&response, earliest, latest);
    assert_eq!(
        header(&response, "ratelimit"),
        format!(r#""hello";r=0;t={retry}"#)
    );
}

/// `Rate-Limiting-Expires-At` names the end of a window that ends between `earliest` and `latest`.
fn assert_window_end(response: &Response<Body>, earliest: SystemTime, latest: SystemTime) {
    let value = header(response, "rate-limiting-expires-at");
    let at = humantime::parse_rfc3339(&value).unwrap();
    assert_rounded_up(at, earliest, latest, &value);
}

#[tokio::test]
async fn memory_headers_on_the_system_clock() {
    real_time_headers(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn redis_headers_on_the_server_clock() {
    let server = RedisServer::start();
    real_time_headers(Arc::new(RedisStore::open(&server.url()).unwrap())).await;
}
