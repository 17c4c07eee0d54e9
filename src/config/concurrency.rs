//! Concurrency limits in a configuration file: at most so many requests of one key in flight.

use std::time::Duration;

use serde::Deserialize;

use super::duration;
use super::key::KeyConfig;
use crate::admission::{FailureMode, MissingKey};
use crate::respond::HeaderFamilies;

/// One concurrency limit, for a route or a group of routes. In TOML:
///
/// ```toml
/// [concurrency.reports]
/// paths = ["/reports/"]          # path prefixes it applies to (for the proxy; optional in code)
/// max_in_flight = 2              # per key, at least 1
/// key = { header = "x-api-key" }
/// store = "shared"               # permits shared by every server using that store
/// permit_ttl = "30s"             # how long a crashed server's permits stay taken
/// failure_mode = "closed"        # or "open" (default)
/// missing_key = "reject"         # or "skip"
/// deadline = "50ms"              # default 100ms
/// headers = ["rate_limiting", "ietf"]   # default; [] for none
/// ```
///
/// The limit's name in headers and storage keys is its table's name.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyConfig {
    /// Path prefixes this limit applies to (the proxy's routing, where it is required; a layer
    /// built in code applies where it is layered). A path belongs to every limit with a prefix
    /// it starts with: see [`Limits::concurrency_for`](super::Limits::concurrency_for).
    #[serde(default)]
    pub paths: Vec<String>,
    /// How many requests of one key may be in flight at once.
    pub max_in_flight: u32,
    /// Whose requests are counted together.
    pub key: KeyConfig,
    /// The name of a store under `[stores]`; may be left out when there is exactly one (or none:
    /// an in-process memory store).
    #[serde(default)]
    pub store: Option<String>,
    /// How long a permit lives without renewal (default `"30s"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub permit_ttl: Option<Duration>,
    // The four settings below repeat `RouteConfig`'s on purpose: one struct flattened into both
    // would lose `deny_unknown_fields` (serde cannot combine the two), and with it the error
    // that names a misspelled field.
    /// `open` (default) or `closed`: what to do when the store fails.
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
    /// `reject` (default: 400) or `skip` (pass unchecked): a request without a key.
    #[serde(default)]
    pub missing_key: Option<MissingKey>,
    /// How long to wait for the store (default `"100ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub deadline: Option<Duration>,
    /// Header families to write (default `["rate_limiting", "ietf"]`).
    #[serde(default)]
    pub headers: Option<HeaderFamilies>,
}

#[cfg(feature = "concurrency")]
mod build {
    use super::ConcurrencyConfig;
    use crate::concurrency::ConcurrencyLimitLayer;
    use crate::config::store::BuiltStore;
    use crate::config::{error, route};
    use crate::error::ConfigError;

    impl ConcurrencyConfig {
        /// The layer of the limit named `name`, its errors named from `field`.
        pub(in crate::config) fn build(
            &self,
            name: &str,
            field: &str,
            store: &BuiltStore,
        ) -> Result<ConcurrencyLimitLayer, ConfigError> {
            let mut builder = ConcurrencyLimitLayer::builder()
                .name(name)
                .max_in_flight(self.max_in_flight)
                .store(store.permits.clone())
                .key(self.key.build(&format!("{field}.key"))?);
            if let Some(ttl) = self.permit_ttl {
                builder = builder.permit_ttl(ttl);
            }
            route::admission(
                builder.common_mut(),
                self.failure_mode,
                self.missing_key,
                self.deadline,
                self.headers,
            );
            builder
                .build()
                .map_err(|err| error::at(field, err, error::layer_setting))
        }
    }
}
