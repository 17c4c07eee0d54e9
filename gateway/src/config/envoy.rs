//! `[serve.envoy]`: Envoy's rate limit service, answered on `serve`'s listeners beside the
//! gateway endpoints, over envoyproxy/ratelimit's YAML files.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tower_redis_ratelimit::HeaderFamilies;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::config::duration;

/// How long the service waits for a store when the table does not say.
pub const DEFAULT_ENVOY_DEADLINE: Duration = Duration::from_millis(100);

/// The `[serve.envoy]` table.
///
/// ```toml
/// [serve.envoy]
/// files = "ratelimit/config"   # a YAML file, or a directory of them
/// failure_mode = "open"        # or "closed": OVER_LIMIT while the store fails
/// deadline = "100ms"
/// headers = ["ietf", "rate_limiting"]
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EnvoyConfig {
    /// envoyproxy/ratelimit's configuration: one YAML file, or a directory whose `.yaml` and
    /// `.yml` files are each a domain. A relative path is from the configuration file's
    /// directory.
    pub files: PathBuf,
    /// `open` (default: the descriptors are answered OK) or `closed` (OVER_LIMIT, with
    /// `Retry-After: 1`) while the store fails.
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
    /// How long to wait for the store (default `"100ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub deadline: Option<Duration>,
    /// The header families put in `response_headers_to_add` for Envoy to pass to the client
    /// (default `["rate_limiting", "ietf"]`).
    #[serde(default)]
    pub headers: Option<HeaderFamilies>,
}

impl EnvoyConfig {
    /// How the service decides.
    pub fn settings(&self) -> EnvoySettings {
        EnvoySettings {
            failure_mode: self.failure_mode.unwrap_or_default(),
            deadline: self.deadline.unwrap_or(DEFAULT_ENVOY_DEADLINE),
            headers: self.headers.unwrap_or(HeaderFamilies::DEFAULT),
        }
    }
}

/// How Envoy's rate limit service decides, beside its rules: `[serve.envoy]` with its defaults.
#[derive(Clone, Copy, Debug)]
pub struct EnvoySettings {
    /// What to answer when the store fails: `Open` says OK, `Closed` says OVER_LIMIT.
    pub failure_mode: FailureMode,
    /// How long a request waits for the store, all its store calls together, before
    /// `failure_mode` answers.
    pub deadline: Duration,
    /// The header families put in `response_headers_to_add`.
    pub headers: HeaderFamilies,
}

/// Why the Envoy files cannot be used; each names its file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvoyFilesError {
    /// A file or directory cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not YAML of the expected shape (the message names the field and the line).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What serde said.
        message: String,
    },
    /// A field is wrong.
    #[error("{}: {error}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The field and the mistake.
        error: super::FieldError,
    },
    /// The store a domain names is not one of the configuration file's.
    #[error("{}: {error}", path.display())]
    Store {
        /// The file.
        path: PathBuf,
        /// The mistake, named by its field (`extensions.store`).
        error: tower_redis_ratelimit::ConfigError,
    },
}
