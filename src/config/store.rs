//! Named stores in a configuration file: where limits are counted.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{SettingError, duration, invalid};
use crate::error::ConfigError;
#[cfg(feature = "concurrency")]
use crate::store::permits::PermitStore;
use crate::store::{MemoryStore, Store};

/// A store. In TOML:
///
/// ```toml
/// [stores.local]
/// type = "memory"
///
/// [stores.shared]
/// type = "redis"
/// url = "redis://127.0.0.1:6379"
/// prefix = "app"
///
/// [stores.cluster]
/// type = "cluster"
/// nodes = ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]
///
/// [stores.ha]
/// type = "sentinel"
/// sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
/// master = "limits"
/// primary_auth = { password = "s3cret" }   # the servers' password, none on the sentinels
/// fallback = { instances = 4 }
///
/// [stores.managed]
/// type = "redis"
/// url = "rediss://app:s3cret@redis.example.com:6380"
/// tls = { ca = "ca.pem", certificate = "client.pem", private_key = "client.key" }
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `memory`, `redis`, `cluster` or `sentinel`.
    #[serde(rename = "type")]
    pub kind: StoreKind,
    /// `redis`: `redis://[user:password@]host[:port][/db]`.
    #[serde(default)]
    pub url: Option<String>,
    /// `cluster`: node URLs; one is enough to find the others.
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// `sentinel`: sentinel URLs.
    #[serde(default)]
    pub sentinels: Option<Vec<String>>,
    /// `sentinel`: the primary's name.
    #[serde(default)]
    pub master: Option<String>,
    /// `sentinel`: how the primary and its replicas are authenticated, apart from the
    /// sentinels (whose URLs carry theirs); unset, as the first sentinel URL says.
    #[serde(default)]
    pub primary_auth: Option<AuthConfig>,
    /// `memory`: the most keys kept (default 1,000,000).
    #[serde(default)]
    pub max_keys: Option<usize>,
    /// Redis stores: the key prefix (default `ratelimit`).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Redis stores: one connection attempt's bound (default `"1s"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub connect_timeout: Option<Duration>,
    /// Redis stores: how many denials to remember (default 100,000; 0 turns the cache off).
    #[serde(default)]
    pub denial_cache: Option<usize>,
    /// Redis stores: quota leases for hot keys (off unless set).
    #[serde(default)]
    pub quota_leases: Option<LeasesConfig>,
    /// Redis stores: a local fallback while Redis fails (off unless set).
    #[serde(default)]
    pub fallback: Option<FallbackConfig>,
    /// Redis stores on `rediss://` URLs: the CA that verifies the servers and a client
    /// certificate (PEM files; unset, Mozilla's roots and no client certificate).
    #[serde(default)]
    pub tls: Option<super::StoreTlsConfig>,
    /// Redis stores: the store is a region's, spending allotments of global policies
    /// (`store::region::RegionStore`; off unless set).
    #[cfg(feature = "regions")]
    #[serde(default)]
    pub region: Option<super::region::RegionConfig>,
}

/// The kinds of store.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// An in-process [`MemoryStore`]: limits per instance.
    Memory,
    /// One Redis server (`RedisStore::builder`).
    Redis,
    /// A Redis Cluster (`RedisStore::cluster`).
    Cluster,
    /// The primary a set of Sentinels names (`RedisStore::sentinel`).
    Sentinel,
}

/// `RedisStoreBuilder::primary_auth`: `{ password = "..." }`, `{ username = "...", password =
/// "..." }`, or `{}` for a primary without a password.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// An ACL user (with `password`).
    #[serde(default)]
    pub username: Option<String>,
    /// The password (`requirepass`, or the user's).
    #[serde(default)]
    pub password: Option<String>,
}

/// `RedisStoreBuilder::quota_leases`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LeasesConfig {
    /// How long a lease is kept (default `"100ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub lifetime: Option<Duration>,
    /// The largest lease as a share of a rule's capacity (default 0.1).
    #[serde(default)]
    pub max_share: Option<f64>,
    /// Keys leased at once (default 10,000).
    #[serde(default)]
    pub max_keys: Option<usize>,
}

/// `RedisStoreBuilder::fallback`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FallbackConfig {
    /// The instances the quotas are divided among.
    pub instances: u32,
    /// A Redis call's bound before the fallback answers (default `"50ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub timeout: Option<Duration>,
    /// Failures in a row that stop calls (default 3).
    #[serde(default)]
    pub failures: Option<u32>,
    /// How long calls stop (default `"1s"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub cool_down: Option<Duration>,
}

impl StoreKind {
    /// The kind as the file names it (`type = "redis"`).
    pub const fn name(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
            StoreKind::Cluster => "cluster",
            StoreKind::Sentinel => "sentinel",
        }
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A built store, as rate limits and concurrency limits use it: one store behind both.
#[derive(Clone)]
pub(super) struct BuiltStore {
    pub(super) rate: Arc<dyn Store>,
    #[cfg(feature = "concurrency")]
    pub(super) permits: Arc<dyn PermitStore>,
    /// A Redis store, kept as itself too, to be pinged ([`Limits::ping_stores`](super::Limits::ping_stores)).
    #[cfg(feature = "redis")]
    pub(super) redis: Option<crate::store::RedisStore>,
    /// The certificates its `tls` files held when it was built: a reload whose files hold
    /// others (a rotated CA or client certificate) builds the store again.
    #[cfg(feature = "tls")]
    pub(super) tls: Option<crate::store::RedisTls>,
}

impl BuiltStore {
    #[cfg(feature = "concurrency")]
    pub(super) fn new<S: Store + PermitStore>(store: S) -> Self {
        let store = Arc::new(store);
        Self {
            permits: store.clone(),
            rate: store,
            #[cfg(feature = "redis")]
            redis: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    #[cfg(not(feature = "concurrency"))]
    pub(super) fn new<S: Store>(store: S) -> Self {
        Self {
            rate: Arc::new(store),
            #[cfg(feature = "redis")]
            redis: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Whether `config`'s `tls` files hold the certificates this store was built with (so a
    /// reload may keep it); a file that cannot be read now does not.
    pub(super) fn same_certificates(&self, config: &StoreConfig) -> bool {
        #[cfg(feature = "tls")]
        return match (&config.tls, &self.tls) {
            (Some(files), Some(built)) => files.read("").is_ok_and(|now| now == *built),
            (None, None) => true,
            _ => false,
        };
        #[cfg(not(feature = "tls"))]
        {
            let _ = config;
            true
        }
    }
}

impl StoreConfig {
    /// The store, its errors named from `field` (`stores.shared`).
    pub(super) fn build(&self, field: &str) -> Result<BuiltStore, ConfigError> {
        self.check_fields(field)?;
        match self.kind {
            StoreKind::Memory => {
                let mut builder = MemoryStore::builder();
                if let Some(max) = self.max_keys {
                    builder = builder.max_keys(max);
                }
                Ok(BuiltStore::new(builder.build()))
            }
            #[cfg(feature = "redis")]
            _ => redis::build(self, field),
            #[cfg(not(feature = "redis"))]
            _ => Err(invalid(
                format!("{field}.type"),
                SettingError::FeatureMissing { feature: "redis" },
            )),
        }
    }

    /// Every field set is one this kind of store has, and every field it needs is set.
    fn check_fields(&self, field: &str) -> Result<(), ConfigError> {
        let redis = self.kind != StoreKind::Memory;
        let fields = [
            ("url", self.url.is_some(), self.kind == StoreKind::Redis),
            (
                "nodes",
                self.nodes.is_some(),
                self.kind == StoreKind::Cluster,
            ),
            (
                "sentinels",
                self.sentinels.is_some(),
                self.kind == StoreKind::Sentinel,
            ),
            (
                "master",
                self.master.is_some(),
                self.kind == StoreKind::Sentinel,
            ),
            (
                "primary_auth",
                self.primary_auth.is_some(),
                self.kind == StoreKind::Sentinel,
            ),
            ("max_keys", self.max_keys.is_some(), !redis),
            ("prefix", self.prefix.is_some(), redis),
            ("connect_timeout", self.connect_timeout.is_some(), redis),
            ("denial_cache", self.denial_cache.is_some(), redis),
            ("quota_leases", self.quota_leases.is_some(), redis),
            ("fallback", self.fallback.is_some(), redis),
            ("tls", self.tls.is_some(), redis),
            #[cfg(feature = "regions")]
            ("region", self.region.is_some(), redis),
        ];
        let required = ["url", "nodes", "sentinels", "master"];
        let store = self.kind;
        for (name, set, applies) in fields {
            if set && !applies {
                return Err(invalid(
                    format!("{field}.{name}"),
                    SettingError::NotAStoreSetting {
                        store: store.name(),
                    },
                ));
            }
            if !set && applies && required.contains(&name) {
                return Err(invalid(
                    format!("{field}.{name}"),
                    SettingError::Required {
                        store: store.name(),
                    },
                ));
            }
        }
        Ok(())
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::{BuiltStore, StoreConfig, StoreKind};
    use crate::config::{SettingError, error, invalid};
    use crate::error::{ConfigError, StoreConfigError};
    use crate::store::{Fallback, QuotaLeases, RedisStore, RedisStoreBuilder};

    pub(super) fn build(config: &StoreConfig, field: &str) -> Result<BuiltStore, ConfigError> {
        let builder = match config.kind {
            StoreKind::Redis => RedisStore::builder(config.url.as_deref().unwrap_or_default()),
            #[cfg(feature = "cluster")]
            StoreKind::Cluster => RedisStore::cluster(config.nodes.clone().unwrap_or_default()),
            #[cfg(feature = "sentinel")]
            StoreKind::Sentinel => {
                let builder = RedisStore::sentinel(
                    config.sentinels.clone().unwrap_or_default(),
                    config.master.as_deref().unwrap_or_default(),
                );
                match &config.primary_auth {
                    Some(auth) => builder.primary_auth(primary_auth(auth, field)?),
                    None => builder,
                }
            }
            #[allow(unreachable_patterns)]
            kind => {
                let feature = if kind == StoreKind::Cluster {
                    "cluster"
                } else {
                    "sentinel"
                };
                return Err(invalid(
                    format!("{field}.type"),
                    SettingError::FeatureMissing { feature },
                ));
            }
        };
        #[cfg(feature = "tls")]
        let tls = match &config.tls {
            Some(files) => Some(files.read(&format!("{field}.tls"))?),
            None => None,
        };
        #[cfg(feature = "tls")]
        let builder = match &tls {
            Some(tls) => builder.tls(tls.clone()),
            None => builder,
        };
        #[cfg(not(feature = "tls"))]
        if config.tls.is_some() {
            return Err(invalid(
                format!("{field}.tls"),
                SettingError::FeatureMissing { feature: "tls" },
            ));
        }
        let store = apply(builder, config)
            .build()
            .map_err(|err| error::at(field, err, setting))?;
        #[cfg(feature = "regions")]
        if let Some(region) = &config.region {
            return Ok(BuiltStore {
                rate: std::sync::Arc::new(crate::config::region::build(
                    region,
                    store.clone(),
                    field,
                )?),
                #[cfg(feature = "concurrency")]
                permits: std::sync::Arc::new(store.clone()),
                redis: Some(store),
                #[cfg(feature = "tls")]
                tls,
            });
        }
        Ok(BuiltStore {
            redis: Some(store.clone()),
            #[cfg(feature = "tls")]
            tls,
            ..BuiltStore::new(store)
        })
    }

    /// `primary_auth` as the builder takes it.
    #[cfg(feature = "sentinel")]
    fn primary_auth(
        auth: &super::AuthConfig,
        field: &str,
    ) -> Result<crate::store::RedisAuth, ConfigError> {
        use crate::store::RedisAuth;
        match (&auth.username, &auth.password) {
            (None, None) => Ok(RedisAuth::none()),
            (None, Some(password)) => Ok(RedisAuth::password(password)),
            (Some(username), Some(password)) => Ok(RedisAuth::user(username, password)),
            (Some(_), None) => Err(invalid(
                format!("{field}.primary_auth.password"),
                SettingError::PasswordRequired,
            )),
        }
    }

    /// The setting of a store that an error of its builder is about.
    fn setting(error: &ConfigError) -> Option<&'static str> {
        use StoreConfigError as E;
        let ConfigError::Store(error) = error else {
            return None;
        };
        Some(match error {
            E::InvalidUrl { setting, .. } | E::NoUrls { setting } => setting,
            E::NoHost { .. } | E::Unsupported { .. } => "url",
            E::TlsWithoutRediss { .. } => "tls",
            E::InvalidTls { part, .. } => match *part {
                "ca" => "tls.ca",
                "certificate" => "tls.certificate",
                _ => "tls.private_key",
            },
            E::NoMaster => "master",
            E::PrimaryAuthWithoutSentinel => "primary_auth",
            E::InvalidPrefix { .. } => "prefix",
            E::ZeroConnectTimeout => "connect_timeout",
            E::LeaseLifetime { .. } => "quota_leases.lifetime",
            E::LeaseShare { .. } => "quota_leases.max_share",
            E::NoLeaseKeys => "quota_leases.max_keys",
            E::FallbackInstances => "fallback.instances",
            E::FallbackTimeout => "fallback.timeout",
            E::FallbackFailures => "fallback.failures",
            E::FallbackCoolDown => "fallback.cool_down",
            _ => return None,
        })
    }

    fn apply(mut builder: RedisStoreBuilder, settings: &StoreConfig) -> RedisStoreBuilder {
        if let Some(prefix) = &settings.prefix {
            builder = builder.prefix(prefix.clone());
        }
        if let Some(timeout) = settings.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(denials) = settings.denial_cache {
            builder = builder.denial_cache(denials);
        }
        if let Some(leases) = &settings.quota_leases {
            let mut config = QuotaLeases::default();
            if let Some(lifetime) = leases.lifetime {
                config = config.lifetime(lifetime);
            }
            if let Some(share) = leases.max_share {
                config = config.max_share(share);
            }
            if let Some(max) = leases.max_keys {
                config = config.max_keys(max);
            }
            builder = builder.quota_leases(config);
        }
        if let Some(fallback) = &settings.fallback {
            let mut config = Fallback::new(fallback.instances);
            if let Some(timeout) = fallback.timeout {
                config = config.timeout(timeout);
            }
            if let Some(failures) = fallback.failures {
                config = config.failures(failures);
            }
            if let Some(cool_down) = fallback.cool_down {
                config = config.cool_down(cool_down);
            }
            builder = builder.fallback(config);
        }
        builder
    }
}
