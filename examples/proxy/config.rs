//! The proxy's configuration file: its own `[proxy]` table, and the crate's limits.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use tower_redis_ratelimit::ConcurrencyLimitLayer;
use tower_redis_ratelimit::config::{KeyConfig, Limits, LimitsConfig};

use crate::BoxError;

/// How long the upstream may take to start its answer unless the file says otherwise: as long
/// as common proxies wait (nginx's `proxy_read_timeout`).
const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// The `[proxy]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyConfig {
    listen: SocketAddr,
    upstream: String,
    /// How long the upstream may take to start its answer (default 60 s); then 504.
    #[serde(default)]
    upstream_timeout: Option<String>,
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
    pub(crate) upstream_timeout: Duration,
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
    let upstream_timeout = match &proxy.upstream_timeout {
        Some(text) => humantime::parse_duration(text)
            .map_err(|err| format!("[proxy] upstream_timeout {text:?}: {err}"))?,
        None => DEFAULT_UPSTREAM_TIMEOUT,
    };
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
                .permit_ttl(Duration::from_secs(30))
                .build()
                .map_err(|err| format!("[proxy.websockets]: {err}"))?,
        ),
        None => None,
    };
    Ok(Loaded {
        listen: proxy.listen,
        upstream: proxy.upstream,
        upstream_timeout,
        metrics: proxy.metrics,
        limits: match previous {
            Some(previous) => limits.rebuild(previous)?,
            None => limits.build()?,
        },
        websockets,
    })
}
