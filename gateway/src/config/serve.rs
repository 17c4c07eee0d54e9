//! The `[serve]` table: what `ratelimit-gateway serve` runs.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::{AccessLogFormat, ConnectionsConfig, EnvoyConfig, LogFormat, TlsConfig};

/// The gateways trusted by default: this host's loopback addresses (nginx on the same host).
pub const DEFAULT_GATEWAYS: [&str; 2] = ["127.0.0.0/8", "::1/128"];

/// The `[serve]` table. At least one of `listen` and `socket`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServeConfig {
    /// A TCP address where gateways ask.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// A Unix domain socket where gateways (a sidecar's neighbours) ask; whoever can open it
    /// is a trusted gateway.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// The networks (CIDRs or addresses) of the gateways whose word on the client address is
    /// taken (default: loopback, `127.0.0.0/8` and `::1`).
    #[serde(default)]
    pub gateways: Option<Vec<String>>,
    /// The header in which gateways name the client: `x-forwarded-for` (the default: its
    /// rightmost address that is not a gateway's), `forwarded` (RFC 7239), or a header of one
    /// address such as `x-real-ip`.
    #[serde(default)]
    pub client_header: Option<String>,
    /// TLS on the TCP listener (default: none, plain HTTP).
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
    /// One line per decision on standard output (default `text`).
    #[serde(default)]
    pub access_log: AccessLogFormat,
    /// How messages are written on standard error (default: `json` when `access_log` is,
    /// `text` otherwise).
    #[serde(default)]
    pub log_format: Option<LogFormat>,
    /// Gateway connections: how many, and their timers.
    #[serde(default)]
    pub connections: ConnectionsConfig,
    /// Envoy's rate limit service on the same listeners, over envoyproxy/ratelimit's files
    /// (none by default).
    #[serde(default)]
    pub envoy: Option<EnvoyConfig>,
}
