//! Run with: cargo run --example quickstart
//!
//! A small axum service with two rate-limited routes:
//!
//! - `GET /`           200, not limited
//! - `GET /api/hello`  200 "hello"; 5 requests per 10 seconds per client IP (fixed window)
//! - `GET /api/key`    200; 3 requests per 10 seconds per `x-api-key` header, burst 3 (GCRA);
//!   400 without the header
//!
//! Environment:
//!
//! - `BIND` (default `127.0.0.1:3000`): the address to serve on
//! - `REDIS_URL` (e.g. `redis://127.0.0.1:6379`): share limits through Redis; without it the
//!   limits live in process memory
//! - `RATE_LIMIT_FAILURE` (`open` by default, or `closed`): what to do when Redis fails
//!
//! Try it: `curl -i http://127.0.0.1:3000/api/hello` six times, or
//! `curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/api/key` four times.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::{ClientIp, HeaderKey};
use tower_redis_ratelimit::{MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store};
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();

    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let failure = match std::env::var("RATE_LIMIT_FAILURE").as_deref() {
        Err(_) | Ok("open") => FailureMode::Open,
        Ok("closed") => FailureMode::Closed,
        Ok(other) => {
            return Err(
                format!("RATE_LIMIT_FAILURE must be `open` or `closed`, not {other:?}").into(),
            );
        }
    };
    let (store, store_name): (std::sync::Arc<dyn Store>, String) = match std::env::var("REDIS_URL")
    {
        Ok(url) => {
            let store = RedisStore::open(&url)?;
            // Never print the password: stdout ends up in terminals, CI logs and bug reports.
            let name = format!("RedisStore at {}", store.redacted_url());
            (std::sync::Arc::new(store), name)
        }
        Err(_) => (
            std::sync::Arc::new(MemoryStore::new()),
            "MemoryStore".to_owned(),
        ),
    };

    let hello = RateLimitLayer::builder()
        .rule(Rule::fixed_window(
            "hello",
            Quota::new(5, Duration::from_secs(10)),
        ))
        .key(ClientIp::peer())
        .store(store.clone())
        .failure_mode(failure)
        .build()?;
    let key = RateLimitLayer::builder()
        .rule(Rule::gcra(
            "key",
            Quota::new(3, Duration::from_secs(10)).with_burst(3),
        ))
        .key(HeaderKey::new("x-api-key"))
        .store(store)
        .failure_mode(failure)
        .build()?;

    let app = Router::new()
        .route(
            "/",
            get(|| async { "tower-redis-ratelimit quickstart: try /api/hello and /api/key\n" }),
        )
        .route("/api/hello", get(|| async { "hello" }).layer(hello))
        .route("/api/key", get(|| async { "key accepted" }).layer(key));

    let listener = tokio::net::TcpListener::bind(&bind).await?;
    println!(
        "quickstart: {store_name}, serving on http://{}",
        listener.local_addr()?
    );
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown())
    .await?;
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
    eprintln!("shutting down");
}
