//! `examples/client`, run as a process against a scripted server: what it reads from each
//! answer's rate-limit headers (`RateLimit`, `RateLimit-Policy`, `Retry-After`,
//! `Rate-Limiting-State`) and how long that tells it to wait. The quickstart tests run it against
//! the real limiter.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::support::{example_binary, success_output};

/// The answers the server gives, one per request, in order.
const ANSWERS: [(StatusCode, &[(&str, &str)]); 4] = [
    // Admitted with nothing left: wait the `t` of `RateLimit`.
    (
        StatusCode::OK,
        &[
            ("ratelimit", r#""hello";r=0;t=1"#),
            ("ratelimit-policy", r#""hello";q=5;w=10"#),
            ("rate-limiting-state", "Allow"),
        ],
    ),
    // Refused: `Retry-After` wins over `t`.
    (
        StatusCode::TOO_MANY_REQUESTS,
        &[("ratelimit", r#""key";r=0;t=10"#), ("retry-after", "1")],
    ),
    // Admitted with quota left: no wait.
    (StatusCode::OK, &[("ratelimit", r#""key";r=2;t=10"#)]),
    // A malformed header tells nothing.
    (StatusCode::OK, &[("ratelimit", "r=;;")]),
];

#[tokio::test]
async fn the_client_reads_each_answers_headers_and_waits_as_they_say() {
    let answered = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&answered);
    let app = Router::new().route(
        "/",
        get(move || async move {
            let (status, headers) = ANSWERS[counter.fetch_add(1, Ordering::SeqCst)];
            let mut response = status.into_response();
            for (name, value) in headers {
                response.headers_mut().insert(*name, value.parse().unwrap());
            }
            response
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let started = Instant::now();
    let stdout = tokio::task::spawn_blocking(move || {
        success_output(
            Command::new(example_binary("client"))
                .arg(format!("http://{addr}/"))
                .arg(ANSWERS.len().to_string())
                .env_remove("CLIENT_KEY")
                .env("CLIENT_MAX_WAIT_SECS", "5"),
        )
    })
    .await
    .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "request 1: 200 state=Allow remaining=0 reset=1s policy=5/10s retry-after=- -> wait 1s",
            "request 2: 429 state=- remaining=0 reset=10s policy=-/-s retry-after=1 -> wait 1s",
            "request 3: 200 state=- remaining=2 reset=10s policy=-/-s retry-after=- -> wait none",
            "request 4: 200 state=- remaining=- reset=-s policy=-/-s retry-after=- -> wait none",
            "4 requests, 1 refused (429), refused twice in a row: 0",
        ]
    );
    assert_eq!(answered.load(Ordering::SeqCst), ANSWERS.len());
    // The two waits of a second, never earlier than told (the jitter only adds).
    assert!(elapsed >= Duration::from_secs(2), "{elapsed:?}");
}
