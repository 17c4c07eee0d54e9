//! What is measured: the scenarios (traffic and quota) and the modes (the limiter in front of
//! the handler).
//!
//! Every mode serves one route, `GET /`, whose handler returns a short body, keyed by the `x-key`
//! request header, with a GCRA quota of the scenario's rate and burst. Adding a mode is one
//! variant of [`Mode`] (listed in `Mode::ALL`, named in `Mode::name`) and one constructor called
//! from [`Mode::router`]; the report and the interleaving take every mode in `ALL`.

use std::time::Duration;

use axum::Router;
use axum::http::HeaderValue;
use axum::routing::get;
use testkit::governor::XKey;
use tower_governor::governor::GovernorConfigBuilder;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::store::{QuotaLeases, RedisStoreBuilder};
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use crate::floor;
use testkit::BoxError;

/// A traffic pattern and the quota it meets.
pub(crate) struct Scenario {
    /// Also the rule's name, so each scenario's Redis state is apart from the other's.
    pub(crate) name: &'static str,
    /// What the scenario shows, for the report.
    pub(crate) about: &'static str,
    /// How many distinct `x-key` values the load generator cycles through.
    pub(crate) keys: usize,
    /// The GCRA quota per key: this many requests per second, up to `burst` at once.
    pub(crate) per_second: u32,
    pub(crate) burst: u32,
}

/// The scenarios every mode runs.
pub(crate) const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "allowed",
        about: "10,000 keys in turn, a quota far above what the run reaches (1,000,000/s, burst \
                1,000,000): ~100% admitted; a key's state drains within microseconds, so most \
                decisions find none and write it",
        keys: 10_000,
        per_second: 1_000_000,
        burst: 1_000_000,
    },
    Scenario {
        name: "hot",
        about: "one key, a quota far above what the run reaches (1,000,000/s, burst 1,000,000): \
                ~100% admitted; every request meets the key's state",
        keys: 1,
        per_second: 1_000_000,
        burst: 1_000_000,
    },
    // The load generator's rate is not known in advance: 100/s admitted out of the tens of
    // thousands offered is about 1% or less, and the report prints the share measured.
    Scenario {
        name: "abusive",
        about: "one key, a quota of 100/s with a burst of 100: ~99% denied",
        keys: 1,
        per_second: 100,
        burst: 100,
    },
    // A hot key offered a few times its rate (the share denied says how many): the leases'
    // case of a saturated key, which reserve a rate and spend it as it conforms.
    Scenario {
        name: "saturated",
        about: "one key, a quota of 10,000/s with a burst of 1,000, offered more (the share \
                denied says how much more)",
        keys: 1,
        per_second: 10_000,
        burst: 1_000,
    },
];

impl Scenario {
    /// The `x-key` values the load generator cycles through.
    pub(crate) fn keys(&self) -> Result<Vec<HeaderValue>, BoxError> {
        if self.keys == 1 {
            return Ok(vec![HeaderValue::from_static(self.name)]);
        }
        (0..self.keys)
            .map(|i| Ok(HeaderValue::from_str(&format!("client-{i}"))?))
            .collect()
    }

    fn rule(&self) -> Rule {
        Rule::gcra(
            self.name,
            Quota::per_second(self.per_second).with_burst(self.burst),
        )
    }
}

/// The limiter in front of the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No limiter: what the HTTP stack and the handler cost on their own.
    None,
    /// tower_governor 0.8 (governor's keyed GCRA in process), keyed like ours, without headers
    /// (its default).
    Governor,
    /// The same with its `x-ratelimit-*` headers on (`use_headers`).
    GovernorHeaders,
    /// `RateLimitLayer` on a `MemoryStore`.
    Memory,
    /// The same writing no header (`HeaderFamilies::NONE`), as tower_governor by default.
    MemoryBare,
    /// `RateLimitLayer` on a `RedisStore` without its denial cache, nor batching: one call per
    /// decision.
    RedisAlone,
    /// `redis-exact` with scripts (`EVALSHA`) instead of functions (`FCALL`), as on Redis 6.2.
    RedisScripts,
    /// `RateLimitLayer` on a `RedisStore` without its denial cache: every decision asks Redis,
    /// concurrent decisions batched into one call.
    RedisExact,
    /// `RateLimitLayer` on a `RedisStore` as it comes: denials remembered and answered in process
    /// until they end.
    Redis,
    /// `RateLimitLayer` on a `RedisStore` with quota leases (`QuotaLeases::default()`): a hot
    /// key's quota reserved a slice at a time and spent in process.
    RedisLeases,
    /// One raw `EVALSHA` of a minimal GCRA script in the handler: see [`floor`].
    Floor,
}

impl Mode {
    /// Every mode, in the order of the report.
    pub(crate) const ALL: [Mode; 11] = [
        Mode::None,
        Mode::Governor,
        Mode::GovernorHeaders,
        Mode::Memory,
        Mode::MemoryBare,
        Mode::RedisAlone,
        Mode::RedisScripts,
        Mode::RedisExact,
        Mode::Redis,
        Mode::RedisLeases,
        Mode::Floor,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Governor => "governor",
            Mode::GovernorHeaders => "governor-headers",
            Mode::Memory => "memory",
            Mode::MemoryBare => "memory-bare",
            Mode::RedisAlone => "redis-alone",
            Mode::RedisScripts => "redis-scripts",
            Mode::RedisExact => "redis-exact",
            Mode::Redis => "redis",
            Mode::RedisLeases => "redis-leases",
            Mode::Floor => "floor",
        }
    }

    /// The mode's app for `scenario`; `redis_url` is the benchmark's own Redis server.
    pub(crate) async fn router(
        self,
        scenario: &Scenario,
        redis_url: &str,
    ) -> Result<Router, BoxError> {
        match self {
            Mode::None => Ok(none()),
            Mode::Governor => governor(scenario, false),
            Mode::GovernorHeaders => governor(scenario, true),
            Mode::Memory => limited(scenario, MemoryStore::new(), HeaderFamilies::DEFAULT),
            Mode::MemoryBare => limited(scenario, MemoryStore::new(), HeaderFamilies::NONE),
            Mode::RedisAlone => {
                let store = RedisStore::builder(redis_url).denial_cache(0).batch(false);
                redis(scenario, store).await
            }
            Mode::RedisScripts => {
                let store = RedisStore::builder(redis_url)
                    .denial_cache(0)
                    .functions(false);
                redis(scenario, store).await
            }
            Mode::RedisExact => {
                redis(scenario, RedisStore::builder(redis_url).denial_cache(0)).await
            }
            Mode::Redis => redis(scenario, RedisStore::builder(redis_url)).await,
            Mode::RedisLeases => {
                let store = RedisStore::builder(redis_url).quota_leases(QuotaLeases::default());
                redis(scenario, store).await
            }
            Mode::Floor => floor::router(scenario, redis_url).await,
        }
    }
}

async fn handler() -> &'static str {
    "ok"
}

fn none() -> Router {
    Router::new().route("/", get(handler))
}

/// This crate's layer on `store`, as a user of the crate writes it.
///
/// Fails closed, so that a store call that missed its deadline shows as a 503 (which the report
/// counts) instead of an admitted request that never asked Redis.
fn limited(
    scenario: &Scenario,
    store: impl Store,
    headers: HeaderFamilies,
) -> Result<Router, BoxError> {
    let limit = RateLimitLayer::builder()
        .rule(scenario.rule())
        .key(HeaderKey::new("x-key"))
        .store(store)
        .headers(headers)
        .failure_mode(FailureMode::Closed)
        .build()?;
    Ok(none().layer(limit))
}

/// `RateLimitLayer` on the `RedisStore` that `store` builds.
async fn redis(scenario: &Scenario, store: RedisStoreBuilder) -> Result<Router, BoxError> {
    let store = store.build()?;
    // The first check connects and loads the script, before any slice is measured.
    let policy = Policy::try_from(scenario.rule())?;
    store
        .check(&Key::from_static("warm-up"), &policy, 1)
        .await?;
    limited(scenario, store, HeaderFamilies::DEFAULT)
}

fn governor(scenario: &Scenario, headers: bool) -> Result<Router, BoxError> {
    let mut config = GovernorConfigBuilder::default().key_extractor(XKey);
    config
        .period(Duration::from_secs(1) / scenario.per_second)
        .burst_size(scenario.burst);
    if headers {
        config.use_headers();
    }
    let config = config
        .finish()
        .ok_or("tower_governor refused the quota (a zero period or burst)")?;
    Ok(none().layer(tower_governor::GovernorLayer::new(config)))
}
