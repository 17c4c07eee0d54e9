//! Limits from a configuration file: stores, named policies, keys, routes and concurrency limits,
//! read by [`LimitsConfig::from_file`] from TOML, YAML or JSON (or deserialized with serde from
//! anything serde reads), validated with the exact field named, and built into the same layers
//! as code builds.
//!
//! ```
//! use tower_redis_ratelimit::config::LimitsConfig;
//!
//! let config: LimitsConfig = serde_json::from_str(r#"{
//!     "stores": { "local": { "type": "memory" } },
//!     "policies": {
//!         "api": { "rules": [ { "name": "second", "algorithm": "gcra",
//!                              "limit": 10, "period": "1s", "burst": 20 } ] }
//!     },
//!     "routes": {
//!         "api": { "paths": ["/api/"], "policy": "api", "key": { "header": "x-api-key" } }
//!     }
//! }"#)?;
//! let limits = config.build()?;
//! let layer = limits.layer("api").expect("a route named api");
//! // let app = axum::Router::new().route("/api/hello", get(hello)).layer(layer.clone());
//! # let _ = layer;
//!
//! // Mistakes name the field:
//! let config: LimitsConfig = serde_json::from_str(r#"{
//!     "routes": { "api": { "policy": "ap1", "key": { "global": "all" } } }
//! }"#)?;
//! let error = config.build().unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "`routes.api.policy`: no policy named \"ap1\" (there are none)"
//! );
//! // ... and say what is wrong in fields:
//! use tower_redis_ratelimit::{ConfigError, config::SettingError};
//! let ConfigError::Field { field, error } = error else { unreachable!() };
//! assert_eq!(field, "routes.api.policy");
//! assert!(matches!(*error, ConfigError::Setting(SettingError::Unknown { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/limits.toml`, `examples/limits.yaml` and `examples/limits.json` show every setting;
//! [`guide::configuration`](crate::guide::configuration) (`docs/configuration.md`) is the
//! reference.

mod concurrency;
pub mod duration;
#[cfg(any(feature = "toml", feature = "yaml", feature = "json"))]
mod environment;
mod error;
mod file;
mod key;
mod load;
mod paths;
mod policy;
#[cfg(feature = "regions")]
mod region;
mod route;
mod shadow;
mod store;
mod store_tls;
mod stores;

use std::collections::BTreeMap;

use serde::Deserialize;

pub use self::concurrency::ConcurrencyConfig;
pub use self::file::ConfigFile;
pub use self::key::{ClientIpConfig, KeyConfig};
pub use self::load::{Format, LoadError};
use self::paths::Paths;
pub use self::policy::{PolicyConfig, RuleConfig};
#[cfg(feature = "regions")]
pub use self::region::{LedgerConfig, RegionConfig};
pub use self::route::{ListConfig, RouteConfig};
use self::shadow::Shadows;
use self::store::BuiltStore;
pub use self::store::{AuthConfig, FallbackConfig, LeasesConfig, StoreConfig, StoreKind};
pub use self::store_tls::StoreTlsConfig;
pub use self::stores::IN_PROCESS_STORE;
use crate::admission::FailureMode;
#[cfg(feature = "concurrency")]
use crate::concurrency::ConcurrencyLimitLayer;
pub use crate::error::SettingError;
use crate::error::{ConfigError, KeyConfigError};
use crate::policy::Policy;
use crate::rate::{Plan, RateLimitLayer, ShadowSwitch};
use crate::store::MemoryStore;

/// A whole set-up of limits, as a configuration file holds it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Stores by name.
    #[serde(default)]
    pub stores: BTreeMap<String, StoreConfig>,
    /// Policies by name.
    #[serde(default)]
    pub policies: BTreeMap<String, PolicyConfig>,
    /// Routes (or groups of routes) by name.
    #[serde(default)]
    pub routes: BTreeMap<String, RouteConfig>,
    /// Concurrency limits by name (the crate's `concurrency` feature).
    #[serde(default)]
    pub concurrency: BTreeMap<String, ConcurrencyConfig>,
    /// Every route that does not set its own [`shadow`](RouteConfig::shadow) starts in shadow
    /// mode (default `false`); [`Limits::shadow_switch`] turns them on or off at run time. A
    /// route's own `shadow`, `true` or `false`, wins over it.
    #[serde(default)]
    pub shadow: bool,
}

/// Built limits: a layer per route and per concurrency limit, and which paths each applies to.
#[derive(Clone)]
pub struct Limits {
    /// The stores built, with the settings they were built from, so that a rebuild keeps those
    /// whose settings did not change.
    stores: BTreeMap<String, (StoreConfig, BuiltStore)>,
    /// The in-process store of a file that names no store.
    in_process: Option<BuiltStore>,
    layers: BTreeMap<String, RateLimitLayer>,
    shadows: Shadows,
    paths: Paths,
    #[cfg(feature = "concurrency")]
    concurrency: BTreeMap<String, ConcurrencyLimitLayer>,
    #[cfg(feature = "concurrency")]
    concurrency_paths: Paths,
}

impl LimitsConfig {
    /// Validates everything and builds the stores (once each, shared by the routes naming them),
    /// the policies and a layer per route and per concurrency limit. Stores do not connect until
    /// their first decision.
    pub fn build(&self) -> Result<Limits, ConfigError> {
        self.build_keeping(None)
    }

    /// Builds as [`build`](Self::build) does, but keeps each store of `previous` whose settings
    /// are unchanged (same name, same settings, or no store named in either): its counts, its
    /// connections, its denial cache and its leases go on, so reloading a file neither hands
    /// every client a fresh quota nor reconnects to Redis. A store's `tls` files are read again:
    /// a store whose files now hold other certificates (rotated) is built again with them.
    ///
    /// It keeps the shadow switches whose setting in the file is unchanged too (the top-level
    /// `shadow`, a route's own `shadow`), in the position they were turned to at run time: a
    /// route an operator moved from shadow to enforcement stays enforced through a reload, until
    /// the file changes that route's `shadow` (or, for a route without its own, the top-level
    /// one). A changed setting starts as the file says.
    pub fn rebuild(&self, previous: &Limits) -> Result<Limits, ConfigError> {
        self.build_keeping(Some(previous))
    }

    fn build_keeping(&self, previous: Option<&Limits>) -> Result<Limits, ConfigError> {
        let stores = self
            .stores
            .iter()
            .map(|(name, store)| {
                let kept = previous
                    .and_then(|previous| previous.stores.get(name))
                    .filter(|(built_from, built)| {
                        built_from == store && built.same_certificates(store)
                    })
                    .map(|(_, built)| built.clone());
                let built = match kept {
                    Some(built) => built,
                    None => store.build(&format!("stores.{name}"))?,
                };
                Ok((name.clone(), (store.clone(), built)))
            })
            .collect::<Result<BTreeMap<_, _>, ConfigError>>()?;
        let policies = self
            .policies
            .iter()
            .map(|(name, policy)| Ok((name.clone(), policy.build(&format!("policies.{name}"))?)))
            .collect::<Result<BTreeMap<_, _>, ConfigError>>()?;
        let in_process = stores.is_empty().then(|| {
            previous
                .and_then(|previous| previous.in_process.clone())
                .unwrap_or_else(|| BuiltStore::new(MemoryStore::new()))
        });
        let default_store = match stores.len() {
            0 => in_process.clone(),
            1 => stores.values().next().map(|(_, built)| built.clone()),
            _ => None,
        };
        let shadows = Shadows::new(self, previous.map(|previous| &previous.shadows));
        let built = Built {
            stores: &stores,
            policies: &policies,
            default_store: default_store.as_ref(),
        };
        let mut layers = BTreeMap::new();
        let mut paths = Paths::new("route");
        for (name, route) in &self.routes {
            let field = format!("routes.{name}");
            let layer = build_route(route, &field, &built, shadows.route(name))?;
            paths.add(&format!("{field}.paths"), name, &route.paths)?;
            layers.insert(name.clone(), layer);
        }
        #[cfg(feature = "concurrency")]
        let (concurrency, concurrency_paths) = self.build_concurrency(&built)?;
        #[cfg(not(feature = "concurrency"))]
        if let Some(name) = self.concurrency.keys().next() {
            return Err(invalid(
                format!("concurrency.{name}"),
                SettingError::FeatureMissing {
                    feature: "concurrency",
                },
            ));
        }
        Ok(Limits {
            stores,
            in_process,
            layers,
            shadows,
            paths: paths.sorted(),
            #[cfg(feature = "concurrency")]
            concurrency,
            #[cfg(feature = "concurrency")]
            concurrency_paths,
        })
    }
}

impl LimitsConfig {
    /// A layer per concurrency limit, and their paths.
    #[cfg(feature = "concurrency")]
    fn build_concurrency(
        &self,
        built: &Built<'_>,
    ) -> Result<(BTreeMap<String, ConcurrencyLimitLayer>, Paths), ConfigError> {
        let mut layers = BTreeMap::new();
        let mut paths = Paths::new("concurrency limit");
        for (name, limit) in &self.concurrency {
            let field = format!("concurrency.{name}");
            let store = built.store(&field, limit.store.as_ref())?;
            layers.insert(name.clone(), limit.build(name, &field, store)?);
            paths.add(&format!("{field}.paths"), name, &limit.paths)?;
        }
        Ok((layers, paths.sorted()))
    }
}

/// What routes are built from.
struct Built<'a> {
    stores: &'a BTreeMap<String, (StoreConfig, BuiltStore)>,
    policies: &'a BTreeMap<String, Policy>,
    default_store: Option<&'a BuiltStore>,
}

impl Built<'_> {
    /// The store named `name` at `field`, or the default one.
    fn store(&self, field: &str, name: Option<&String>) -> Result<&BuiltStore, ConfigError> {
        match name {
            Some(name) => self
                .stores
                .get(name)
                .map(|(_, built)| built)
                .ok_or_else(|| {
                    invalid(
                        format!("{field}.store"),
                        SettingError::Unknown {
                            table: "store",
                            name: name.clone(),
                            known: names(self.stores.keys()),
                        },
                    )
                }),
            None => self.default_store.ok_or_else(|| {
                invalid(
                    format!("{field}.store"),
                    SettingError::StoreRequired {
                        stores: names(self.stores.keys()),
                    },
                )
            }),
        }
    }
}

fn build_route(
    route: &RouteConfig,
    field: &str,
    built: &Built<'_>,
    shadow: &ShadowSwitch,
) -> Result<RateLimitLayer, ConfigError> {
    let policies = built.policies;
    let unknown = |field: String, name: &String| {
        invalid(
            field,
            SettingError::Unknown {
                table: "policy",
                name: name.clone(),
                known: names(policies.keys()),
            },
        )
    };
    let policy = policies
        .get(&route.policy)
        .ok_or_else(|| unknown(format!("{field}.policy"), &route.policy))?;
    if route.failure_mode == Some(FailureMode::Open) {
        let global = std::iter::once(&route.policy)
            .chain(route.plans.values())
            .find(|name| policies.get(*name).is_some_and(Policy::is_global));
        if let Some(policy) = global {
            return Err(invalid(
                format!("{field}.failure_mode"),
                SettingError::GlobalFailsClosed {
                    policy: policy.clone(),
                },
            ));
        }
    }
    let delayed = |name: &String, policy: &Policy| {
        route::delayed(policy, route.max_delay).map_err(|err| route::delay_error(field, name, err))
    };
    let policy = &delayed(&route.policy, policy)?;
    let store = built.store(field, route.store.as_ref())?;
    let key = route.key.build(&format!("{field}.key"))?;
    let exemptions = route::exemptions(route, field, &*key)?;
    let mut builder = RateLimitLayer::builder()
        .policy(policy)
        .store(store.rate.clone())
        .key(key)
        .exemptions(exemptions)
        .shadow_switch(shadow.clone())
        .shadow_headers(route.shadow_headers);
    route::admission(
        builder.common_mut(),
        route.failure_mode,
        route.missing_key,
        route.deadline,
        route.headers,
    );
    if let Some(cost) = route.cost {
        builder = builder.cost(move |_| cost);
    }
    for (plan, name) in &route.plans {
        let policy = policies
            .get(name)
            .ok_or_else(|| unknown(format!("{field}.plans.{plan}"), name))?;
        builder = builder.plan(plan.as_str(), &delayed(name, policy)?);
    }
    if let Some(header) = &route.plan_header {
        let field = format!("{field}.plan_header");
        if route.plans.is_empty() {
            return Err(invalid(field, SettingError::NoPlans));
        }
        let header = http::HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
            ConfigError::from(KeyConfigError::InvalidHeaderName {
                name: header.clone(),
            })
            .at(field)
        })?;
        builder = builder.choose_plan(move |parts| {
            let name = parts.headers.get(&header)?.to_str().ok()?;
            Some(Plan::new(name))
        });
    }
    builder
        .build()
        .map_err(|err| error::at(field, err, error::layer_setting))
}

impl Limits {
    /// The layer of the route named `name`.
    pub fn layer(&self, name: &str) -> Option<&RateLimitLayer> {
        self.layers.get(name)
    }

    /// The switch of every route that does not set its own `shadow`: on, they are in shadow
    /// mode; off, they enforce. The file's top-level `shadow` sets it; turn it either way at run
    /// time. A route that sets its own `shadow` has its own switch,
    /// `limits.layer(name)?.shadow_switch()`.
    pub fn shadow_switch(&self) -> &ShadowSwitch {
        self.shadows.all()
    }

    /// Every route's name and layer.
    pub fn layers(&self) -> impl Iterator<Item = (&str, &RateLimitLayer)> {
        self.layers
            .iter()
            .map(|(name, layer)| (name.as_str(), layer))
    }

    /// The routes `path` belongs to, the narrowest first: every route with a path prefix that
    /// `path` starts with. Routes stack as nested layers do, the narrowest outermost: a request
    /// is decided by each in turn, a refusal ends it (a broader route never counts what a
    /// narrower one refused), and a narrower route, a shadow one least of all, never lifts the
    /// limit of a broader one.
    pub fn routes_for<'a>(
        &'a self,
        path: &str,
    ) -> impl DoubleEndedIterator<Item = (&'a str, &'a RateLimitLayer)> + Clone + use<'a> {
        let layers = &self.layers;
        self.paths
            .routes_for(path)
            .iter()
            .filter_map(move |name| Some((name.as_str(), layers.get(name)?)))
    }

    /// Each route path prefix, the longest first, with the routes that a path under it (and no
    /// longer prefix) belongs to, the narrowest first: what [`routes_for`](Self::routes_for)
    /// answers, for `ratelimit-gateway check` to show.
    pub fn route_paths(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.paths.stacks()
    }

    /// The concurrency limit named `name`.
    #[cfg(feature = "concurrency")]
    #[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
    pub fn concurrency_layer(&self, name: &str) -> Option<&ConcurrencyLimitLayer> {
        self.concurrency.get(name)
    }

    /// Every concurrency limit's name and layer.
    #[cfg(feature = "concurrency")]
    #[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
    pub fn concurrency_layers(&self) -> impl Iterator<Item = (&str, &ConcurrencyLimitLayer)> {
        self.concurrency
            .iter()
            .map(|(name, layer)| (name.as_str(), layer))
    }

    /// The concurrency limits `path` belongs to, the narrowest first, as
    /// [`routes_for`](Self::routes_for) finds routes: a request holds a slot of each.
    #[cfg(feature = "concurrency")]
    #[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
    pub fn concurrency_for<'a>(
        &'a self,
        path: &str,
    ) -> impl DoubleEndedIterator<Item = (&'a str, &'a ConcurrencyLimitLayer)> + Clone + use<'a>
    {
        let layers = &self.concurrency;
        self.concurrency_paths
            .routes_for(path)
            .iter()
            .filter_map(move |name| Some((name.as_str(), layers.get(name)?)))
    }

    /// Each concurrency limit's path prefix, the longest first, with the limits a path under it
    /// belongs to, as [`route_paths`](Self::route_paths) shows routes.
    #[cfg(feature = "concurrency")]
    #[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
    pub fn concurrency_paths(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.concurrency_paths.stacks()
    }
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("Limits");
        debug
            .field("routes", &self.layers.keys().collect::<Vec<_>>())
            .field("paths", &self.paths);
        #[cfg(feature = "concurrency")]
        debug
            .field("concurrency", &self.concurrency.keys().collect::<Vec<_>>())
            .field("concurrency_paths", &self.concurrency_paths);
        debug.finish()
    }
}

fn names<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    names.cloned().collect()
}

fn invalid(field: String, error: impl Into<ConfigError>) -> ConfigError {
    ConfigError::Field {
        field,
        error: Box::new(error.into()),
    }
}
