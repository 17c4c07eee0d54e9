//! Run with: cargo run --example websocket
//!
//! An echo WebSocket server that allows each user at most `MAX_SOCKETS` open connections at once,
//! across every instance that shares the same Redis.
//!
//! - `GET /ws?user=<name>`  upgrades to an echo WebSocket; 429 with `Retry-After` when the user
//!   already has `MAX_SOCKETS` open; 400 without `user`
//!
//! The layer admits the upgrade request and puts a `ConcurrencyPermit` into its extensions; the
//! handler moves the permit into the task that serves the socket, so the slot is held for the life
//! of the connection, not just the 101 response. If an instance crashes, its sockets' slots come
//! back within the permit TTL (10 s here), because nothing renews them any more.
//!
//! Environment:
//!
//! - `BIND` (default `127.0.0.1:3001`): the address to serve on
//! - `REDIS_URL` (e.g. `redis://127.0.0.1:6379`): share the limit between instances; without it
//!   the limit is per process
//! - `MAX_SOCKETS` (default 2)
//!
//! Try it: run two instances on different `BIND` addresses with the same `REDIS_URL`, then open
//! sockets with any WebSocket client, e.g. `websocat 'ws://127.0.0.1:3001/ws?user=alice'`: the
//! third one for alice, on either instance, is refused.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::WebSocketUpgrade;
use axum::extract::ws::{Message, WebSocket};
use axum::response::Response;
use axum::routing::get;
use http::request::Parts;
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
use tower_redis_ratelimit::key::{Key, KeyError};
use tower_redis_ratelimit::store::permits::PermitStore;
use tower_redis_ratelimit::{ConcurrencyLimitLayer, MemoryStore, RedisStore};
/// The user named in the query string: browsers cannot set headers on a WebSocket handshake.
fn user(parts: &Parts) -> Result<Key, KeyError> {
    parts
        .uri
        .query()
        .into_iter()
        .flat_map(|query| query.split('&'))
        .find_map(|pair| pair.strip_prefix("user="))
        .filter(|user| !user.is_empty())
        .map(Key::from)
        .ok_or_else(|| KeyError::missing("the `user` query parameter is missing"))
}

/// The permit is `None` only when the store failed and the layer let the socket through without
/// a slot (it fails open by default).
async fn socket(permit: Option<ConcurrencyPermit>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| async move {
        // Held until the connection ends; dropping it gives the slot back.
        let _permit = permit;
        echo(socket).await;
    })
}

async fn echo(mut socket: WebSocket) {
    while let Some(Ok(message)) = socket.recv().await {
        if matches!(message, Message::Close(_)) || socket.send(message).await.is_err() {
            break;
        }
    }
}

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

    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:3001".to_owned());
    let max_sockets: u32 = match std::env::var("MAX_SOCKETS") {
        Ok(text) => text
            .parse()
            .map_err(|_| format!("MAX_SOCKETS must be a number, not {text:?}"))?,
        Err(_) => 2,
    };
    let store: Arc<dyn PermitStore> = match std::env::var("REDIS_URL") {
        Ok(url) => Arc::new(RedisStore::open(&url)?),
        Err(_) => Arc::new(MemoryStore::new()),
    };
    let limit = ConcurrencyLimitLayer::builder()
        .name("sockets")
        .max_in_flight(max_sockets)
        .key(user)
        .store(store)
        .permit_ttl(Duration::from_secs(10))
        .build()?;

    let app = Router::new().route("/ws", get(socket)).layer(limit);
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    tracing::info!(
        "serving on ws://{}/ws?user=<name>, at most {max_sockets} sockets per user",
        listener.local_addr()?
    );
    axum::serve(listener, app).await?;
    Ok(())
}
