//! The proxy's configuration file: its own `[proxy]` table, and the crate's limits.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use tower_redis_ratelimit::ConcurrencyLimitLayer;
use tower_redis_ratelimit::config::{KeyConfig, Limits, LimitsConfig};

use crate::BoxError;

/// The `[proxy]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyConfig {
    listen: SocketAddr,
    upstream: String,
    #[serde(default)]
    metrics: Option<SocketAddr>,
    #[serde(default)]
    websockets: Option<WebSocketsConfig>,
}

/// At most `max_per_key` open upgrades (WebSocket tunnels) per key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebSocketsConfig {
    max_per_key: u32,
    key: KeyConfig,
}

/// A loaded file: the proxy's settings and the built limits.
pub(crate) struct Loaded {
    pub(crate) listen: SocketAddr,
    pub(crate) upstream: String,
    pub(crate) metrics: Option<SocketAddr>,
    pub(crate) limits: Limits,
    pub(crate) websockets: Option<ConcurrencyLimitLayer>,
}

/// Reads, checks and builds the file at `path`; on a reload, keeping the stores of `previous`
/// whose settings did not change (their counts and connections).
pub(crate) fn load(path: &str, previous: Option<&Limits>) -> Result<Loaded, BoxError> {
    let text = std::fs::read_to_string(path)?;
    let mut table: toml::Table = toml::from_str(&text)?;
    let proxy = table
        .remove("proxy")
        .ok_or("no [proxy] table (listen and upstream)")?;
    let proxy: ProxyConfig = proxy.try_into().map_err(|err| format!("[proxy]: {err}"))?;
    let limits: LimitsConfig = toml::Value::Table(table).try_into()?;
    let websockets = match proxy.websockets {
        Some(websockets) => Some(
            ConcurrencyLimitLayer::builder()
                .name("websockets")
                .max_in_flight(websockets.max_per_key)
                .key(
                    websockets
                        .key
                        .extractor()
                        .map_err(|err| format!("[proxy.websockets]: {err}"))?,
                )
                .lease(Duration::from_secs(30))
                .build()
                .map_err(|err| format!("[proxy.websockets]: {err}"))?,
        ),
        None => None,
    };
    Ok(Loaded {
        listen: proxy.listen,
        upstream: proxy.upstream,
        metrics: proxy.metrics,
        limits: match previous {
            Some(previous) => limits.rebuild(previous)?,
            None => limits.build()?,
        },
        websockets,
    })
}
