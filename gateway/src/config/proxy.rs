//! The `[proxy]` table: what `ratelimit-gateway proxy` runs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tower_redis_ratelimit::config::{ConcurrencyConfig, KeyConfig, duration};

use super::{AccessLogFormat, ConnectionsConfig, LogFormat, TlsConfig, size};

/// How long a WebSocket tunnel's permit lives without renewal (the store's heartbeat renews it
/// while the tunnel is open).
const TUNNEL_PERMIT_TTL: Duration = Duration::from_secs(30);

/// The `[proxy]` table.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The service's base URL.
    pub upstream: String,
    /// How long the upstream may take to start its answer, counted from the end of the
    /// request's body (default 60 s); then 504.
    #[serde(default, deserialize_with = "duration::optional")]
    pub upstream_timeout: Option<Duration>,
    /// A PEM file of the certificates an `https://` upstream's must chain to (default:
    /// Mozilla's roots).
    #[serde(default)]
    pub upstream_ca: Option<PathBuf>,
    /// The largest request body forwarded, in bytes or as `"10MiB"` (default: no limit); a
    /// larger one is answered 413.
    #[serde(default, deserialize_with = "size::optional")]
    pub max_body_size: Option<u64>,
    /// TLS on the listener (default: none, plain HTTP).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Where `/healthz`, `/readyz`, `/metrics` and `POST /reset` are served (none by default);
    /// a loopback address unless `admin_token` is set.
    #[serde(default)]
    pub admin: Option<SocketAddr>,
    /// The bearer token `POST /reset` on the admin address requires (default: none, and then
    /// `admin` must be a loopback address). Meant to be given as `"${VAR}"`, from the
    /// environment, rather than written in the file.
    #[serde(default)]
    pub admin_token: Option<String>,
    /// One line per request on standard output (default `text`).
    #[serde(default)]
    pub access_log: AccessLogFormat,
    /// How messages are written on standard error (default: `json` when `access_log` is,
    /// `text` otherwise).
    #[serde(default)]
    pub log_format: Option<LogFormat>,
    /// Client connections: how many, and their timers.
    #[serde(default)]
    pub connections: ConnectionsConfig,
    /// At most so many open upgrades (WebSocket tunnels) per key.
    #[serde(default)]
    pub websockets: Option<WebSocketsConfig>,
}

/// `websockets = { max_per_key = N, key = { ... } }`: at most N open tunnels per key.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WebSocketsConfig {
    /// Tunnels per key.
    pub max_per_key: u32,
    /// Whose tunnels are counted together.
    pub key: KeyConfig,
    /// The store the tunnels are counted in (default: the file's default store).
    #[serde(default)]
    pub store: Option<String>,
}

impl WebSocketsConfig {
    /// The concurrency limit it describes.
    pub fn limit(&self) -> ConcurrencyConfig {
        ConcurrencyConfig {
            paths: Vec::new(),
            max_in_flight: self.max_per_key,
            key: self.key.clone(),
            store: self.store.clone(),
            permit_ttl: Some(TUNNEL_PERMIT_TTL),
            failure_mode: None,
            missing_key: None,
            deadline: None,
            headers: None,
        }
    }
}
