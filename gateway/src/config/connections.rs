//! The settings of a listener that `proxy` and `serve` share, as their tables write them
//! (`connections = { ... }`, `access_log`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tower_redis_ratelimit::config::duration;

use super::FieldError;

/// How long a shutdown goes on accepting after `/readyz` turned 503, unless the file says:
/// load balancers that probe `/readyz` every second or two, or a Kubernetes endpoint update,
/// stop sending new requests within a few seconds; requests that still come meanwhile are
/// served rather than refused.
pub const DEFAULT_DRAIN_DELAY: Duration = Duration::from_secs(5);

/// `connections = { ... }` in a command's table: how many connections it keeps and how long it
/// waits for them. Every field is optional.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConnectionsConfig {
    /// The most client connections open at once (default 10,000); beyond it, new connections
    /// wait in the listen queue until one closes.
    #[serde(default)]
    pub max: Option<usize>,
    /// How long a client may take to send a request head, counted from its first byte (or from
    /// the connection's opening, for its first request); then the connection is closed
    /// (default `"10s"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub header_timeout: Option<Duration>,
    /// How long a keep-alive connection may stay idle between two requests (default `"60s"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub idle_timeout: Option<Duration>,
    /// On SIGTERM, how long the listeners go on accepting and serving while `/readyz` answers
    /// 503, so that load balancers move traffic away before connections are refused (default
    /// `"5s"`; `"0s"` stops accepting at once).
    #[serde(default, deserialize_with = "duration::optional")]
    pub drain_delay: Option<Duration>,
    /// Then, how long requests in flight and open tunnels may go on before they are cut
    /// (tunnels with a WebSocket close frame) and the process exits (default `"30s"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub drain_timeout: Option<Duration>,
    /// How many threads serve connections, each with its own event loop and its own
    /// connections to the upstream, a connection staying on one from its accept to its close
    /// (default: one per core).
    #[serde(default)]
    pub workers: Option<usize>,
}

/// [`ConnectionsConfig`] with its defaults filled in and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connections {
    /// The most client connections open at once.
    pub max: usize,
    /// How long a request head may take.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may stay idle.
    pub idle_timeout: Duration,
    /// How long a shutdown keeps accepting while `/readyz` says it is leaving.
    pub drain_delay: Duration,
    /// How long a shutdown waits for what is in flight.
    pub drain_timeout: Duration,
    /// How many worker threads serve connections; 0: the runtime that calls
    /// [`crate::runtime::serve_connections`] does.
    pub workers: usize,
    /// Whether an HTTP/2 request's `:authority` is taken whatever it is (`serve`, where it
    /// routes nothing: gRPC's C core sends a Unix socket's path), rather than refused as h2
    /// refuses what `http::uri::Authority` does not parse (`proxy`, which must not forward a
    /// malformed request).
    pub any_authority: bool,
    /// Whether its connections count in `gateway_connections_open` (a serving listener's do,
    /// the admin address's own do not).
    pub counted: bool,
}

impl Connections {
    /// The defaults: 10,000 connections, 10 s for a head, 60 s idle, 5 s of notice then 30 s
    /// to drain, one worker per core.
    pub fn defaults() -> Connections {
        Connections {
            max: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            drain_delay: DEFAULT_DRAIN_DELAY,
            drain_timeout: Duration::from_secs(30),
            workers: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            any_authority: false,
            counted: true,
        }
    }
}

impl ConnectionsConfig {
    /// The settings, the defaults filled in; a mistake is named from `field`
    /// (`proxy.connections`).
    pub fn settings(&self, field: &str) -> Result<Connections, FieldError> {
        let default = Connections::defaults();
        let positive = |name: &str, value: Option<Duration>, default: Duration| match value {
            Some(value) if value.is_zero() => Err(FieldError::new(
                format!("{field}.{name}"),
                "must be longer than 0 (write e.g. \"10s\")",
            )),
            Some(value) => Ok(value),
            None => Ok(default),
        };
        let max = match self.max {
            Some(0) => {
                return Err(FieldError::new(
                    format!("{field}.max"),
                    "must be at least 1",
                ));
            }
            Some(max) => max,
            None => default.max,
        };
        Ok(Connections {
            max,
            header_timeout: positive(
                "header_timeout",
                self.header_timeout,
                default.header_timeout,
            )?,
            idle_timeout: positive("idle_timeout", self.idle_timeout, default.idle_timeout)?,
            // Zero is allowed for both: stop accepting at once, cut at once.
            drain_delay: self.drain_delay.unwrap_or(default.drain_delay),
            drain_timeout: self.drain_timeout.unwrap_or(default.drain_timeout),
            workers: match self.workers {
                Some(0) => {
                    return Err(FieldError::new(
                        format!("{field}.workers"),
                        "must be at least 1",
                    ));
                }
                Some(workers) => workers,
                None => default.workers,
            },
            any_authority: default.any_authority,
            counted: default.counted,
        })
    }
}

/// `access_log = "..."` in a command's table: one line per request on standard output.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogFormat {
    /// `key=value` pairs (the default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
    /// No access log.
    Off,
}

/// `log_format = "..."` in a command's table: how the messages on standard error are written
/// (the start-up line, warnings, reloads).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// A line of text per message: time, level, where, message and its fields.
    Text,
    /// One JSON object per message, with `time`, `level`, `target`, `message` and the
    /// message's fields.
    Json,
}

impl LogFormat {
    /// `log_format` as the file says, or else JSON when the access log is JSON (a program that
    /// reads one reads the other), text otherwise.
    pub fn or_like(format: Option<LogFormat>, access_log: AccessLogFormat) -> LogFormat {
        format.unwrap_or(match access_log {
            AccessLogFormat::Json => LogFormat::Json,
            _ => LogFormat::Text,
        })
    }
}

/// `tls = { certificate = "...", private_key = "..." }`: TLS on a listener, from PEM files.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, the server's first.
    pub certificate: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub private_key: PathBuf,
}
