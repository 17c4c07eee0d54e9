//! A Redis store's `region` table: the store is a region's ([`RegionStore`]), spending
//! allotments of global policies from a ledger.

use std::time::Duration;

use serde::Deserialize;

use super::{SettingError, duration, error, invalid};
use crate::error::{ConfigError, StoreConfigError};
use crate::store::RedisStore;
use crate::store::region::{DEFAULT_MAX_SKEW, Ledger, PartitionMode, RegionStore};

/// `store::region::RegionStore::builder`: in TOML,
///
/// ```toml
/// [stores.eu]
/// type = "redis"
/// url = "redis://127.0.0.1:6379"
/// region = { name = "eu-west", ledger = { url = "redis://ledger.internal:6379" }, partition = { emergency = { fraction = 0.1 } } }
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegionConfig {
    /// The region's name, the same in every instance of the region.
    pub name: String,
    /// Where the ledger lives.
    pub ledger: LedgerConfig,
    /// Replicas of the ledger that must hold a take before it counts (default 0).
    #[serde(default)]
    pub replicas: Option<u32>,
    /// How long to wait for them (default `"200ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub replica_timeout: Option<Duration>,
    /// `"refuse"` (default) or `{ emergency = { fraction = 0.1 } }`.
    #[serde(default)]
    pub partition: Option<PartitionMode>,
    /// The bound on clock skew (default `"10ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub max_skew: Option<Duration>,
    /// How often demand is reported and allotments moved (default `"100ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub sync_every: Option<Duration>,
    /// A move's call's bound (default `"500ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub move_timeout: Option<Duration>,
    /// How long the ledger must fail before the region counts itself cut off (default twice
    /// `move_timeout`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub partition_after: Option<Duration>,
}

/// The ledger's Redis: one server (`url`), or the primary that Sentinels name (`sentinels` and
/// `master`); not a Cluster (a take touches keys of several hash slots).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// `redis://[user:password@]host[:port][/db]`.
    #[serde(default)]
    pub url: Option<String>,
    /// Sentinel URLs.
    #[serde(default)]
    pub sentinels: Option<Vec<String>>,
    /// The primary's name, with `sentinels`.
    #[serde(default)]
    pub master: Option<String>,
    /// The key prefix (default `ratelimit`).
    #[serde(default)]
    pub prefix: Option<String>,
    /// A `rediss://` ledger's CA and client certificate, as a store's `tls`.
    #[serde(default)]
    pub tls: Option<super::StoreTlsConfig>,
}

impl LedgerConfig {
    fn build(&self, field: &str) -> Result<RedisStore, ConfigError> {
        let builder = match (&self.url, &self.sentinels, &self.master) {
            (Some(url), None, None) => RedisStore::builder(url),
            #[cfg(feature = "sentinel")]
            (None, Some(sentinels), Some(master)) => RedisStore::sentinel(sentinels, master),
            _ => return Err(invalid(field.to_owned(), SettingError::LedgerAddress)),
        };
        let builder = match &self.prefix {
            Some(prefix) => builder.prefix(prefix.clone()),
            None => builder,
        };
        let builder = match &self.tls {
            #[cfg(feature = "tls")]
            Some(tls) => builder.tls(tls.read(&format!("{field}.tls"))?),
            #[cfg(not(feature = "tls"))]
            Some(_) => {
                return Err(invalid(
                    format!("{field}.tls"),
                    SettingError::FeatureMissing { feature: "tls" },
                ));
            }
            None => builder,
        };
        builder.build().map_err(|err| err.at(field))
    }
}

impl RegionConfig {
    /// The ledger this table names (the table at `field`), as its region store reaches it: for
    /// an operator's commands (`ratelimit-gateway ledger declare FILE`). Builds, does not
    /// connect.
    pub fn ledger(&self, field: &str) -> Result<Ledger, ConfigError> {
        let store = self.ledger.build(&format!("{field}.ledger"))?;
        Ok(Ledger::new(store).replicas(
            self.replicas.unwrap_or(0),
            self.replica_timeout.unwrap_or(Duration::from_millis(200)),
        ))
    }

    /// The bound on clock skew the region runs with: `max_skew`, or its default.
    pub fn skew(&self) -> Duration {
        self.max_skew.unwrap_or(DEFAULT_MAX_SKEW)
    }
}

/// The region store of `store` (built from the table at `field`) that `config` describes.
pub(super) fn build(
    config: &RegionConfig,
    store: RedisStore,
    field: &str,
) -> Result<RegionStore, ConfigError> {
    let field = format!("{field}.region");
    let ledger = config.ledger(&field)?;
    let mut builder = RegionStore::builder(config.name.clone(), store, ledger);
    if let Some(mode) = config.partition {
        builder = builder.partition(mode);
    }
    if let Some(skew) = config.max_skew {
        builder = builder.max_skew(skew);
    }
    if let Some(every) = config.sync_every {
        builder = builder.sync_every(every);
    }
    if let Some(timeout) = config.move_timeout {
        builder = builder.move_timeout(timeout);
    }
    if let Some(after) = config.partition_after {
        builder = builder.partition_after(after);
    }
    builder.build().map_err(|err| {
        error::at(&field, err, |err| match err {
            ConfigError::Store(StoreConfigError::InvalidRegionName { .. }) => Some("name"),
            ConfigError::Store(StoreConfigError::EmergencyFraction { .. }) => Some("partition"),
            _ => None,
        })
    })
}
