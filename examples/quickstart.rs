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
//! - `REDIS_URL` (e.g. `redis://127.0.0.1:6379`): share limits through Redis; without it (or the
//!   next two) the limits live in process memory
//! - `REDIS_CLUSTER_URLS` (comma-separated node URLs): share limits through a Redis Cluster
//! - `REDIS_SENTINEL_URLS` (comma-separated sentinel URLs) and `REDIS_SENTINEL_MASTER` (the
//!   primary's name): share limits through the primary the sentinels name, across failovers
//!
//! At most one of `REDIS_URL`, `REDIS_CLUSTER_URLS` and `REDIS_SENTINEL_URLS` may be set.
//! - `RATE_LIMIT_FAILURE` (`open` by default, or `closed`): what to do when Redis fails
//!
//! Try it: `curl -i http://127.0.0.1:3000/api/hello` six times, or
//! `curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/api/key` four times.

use std::net::SocketAddr;
use std::sync::Arc;
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
        // Colours for a terminal only: escape codes in a log file or a pipe are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
    let (store, store_name) = store_from_env()?;

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

/// The store the environment asks for, and how to name it (never with a password: stdout ends up
/// in terminals, CI logs and bug reports).
fn store_from_env() -> Result<(Arc<dyn Store>, String), Box<dyn std::error::Error>> {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let list = |value: String| -> Vec<String> {
        value.split(',').map(|url| url.trim().to_owned()).collect()
    };
    let (url, cluster, sentinels) = (
        var("REDIS_URL"),
        var("REDIS_CLUSTER_URLS"),
        var("REDIS_SENTINEL_URLS"),
    );
    let set = [&url, &cluster, &sentinels]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if set > 1 {
        return Err(
            "set at most one of REDIS_URL, REDIS_CLUSTER_URLS and REDIS_SENTINEL_URLS".into(),
        );
    }
    let store = if let Some(nodes) = cluster {
        RedisStore::cluster(list(nodes)).build()?
    } else if let Some(sentinels) = sentinels {
        let master = var("REDIS_SENTINEL_MASTER")
            .ok_or("REDIS_SENTINEL_URLS needs REDIS_SENTINEL_MASTER, the primary's name")?;
        RedisStore::sentinel(list(sentinels), &master).build()?
    } else if let Some(url) = url {
        let store = RedisStore::open(&url)?;
        let name = format!("RedisStore at {}", store.redacted_url());
        return Ok((Arc::new(store), name));
    } else {
        return Ok((Arc::new(MemoryStore::new()), "MemoryStore".to_owned()));
    };
    let name = format!("RedisStore on {}", store.redacted_url());
    Ok((Arc::new(store), name))
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
