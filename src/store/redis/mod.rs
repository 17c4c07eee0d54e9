//! The Redis store: state shared by every replica, one atomic script call per decision.
//!
//! Its parts, by role, one way down (each takes the store's state, [`Inner`], declared here):
//!
//! - `builder`: the settings, and the store they build.
//! - `connect`: where Redis is (one server, a Cluster, the primary Sentinels name) and the one
//!   connection every call shares; the reset listener's connections; a cluster's hash slots.
//! - `script`: the entry points of `lua/` and how a call of one is sent.
//! - `key`: how a client key and a rule's state are named in Redis keys.
//! - `local`: what is answered in process (denials, quota leases, batches, the fallback).
//! - `reset`: resets made here and heard from other instances.
//! - `permits`: concurrency permits.
//! - `wrapped`: what a store wrapping this one (`store::region`) may use of it.
//!
//! `RedisStore` and its state stay here rather than in a file beside the parts: every part takes
//! that state, and the store calls every part, so a sibling file would tie each part and the
//! store into a cycle.

mod builder;
mod connect;
mod key;
mod local;
#[cfg(feature = "concurrency")]
mod permits;
mod reset;
mod script;
mod shares;
#[cfg(feature = "regions")]
pub(super) mod wrapped;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use self::builder::RedisStoreBuilder;
#[cfg(feature = "sentinel")]
pub use self::connect::RedisAuth;
#[cfg(feature = "tls")]
pub use self::connect::RedisTls;
use self::connect::SharedConnection;
#[cfg(all(feature = "tls", feature = "config"))]
pub(crate) use self::connect::check_tls;
pub use self::connect::redact_url;
use self::key::{StateNames, StorageKey};
use self::local::{Answer, Batcher, Degraded, Denials, Leases, batch, fallback, leases};
pub use self::local::{Fallback, QuotaLeases};
pub use self::shares::ShareTiming;
#[cfg(feature = "concurrency")]
use super::permits::heartbeat::Heartbeat;
use super::{Store, StoreError, StoreFuture};
use crate::clock::Clock;
use crate::decision::{Decision, Verdicts};
use crate::error::ConfigError;
use crate::key::Key;
use crate::policy::Policy;

/// State shared in Redis, so every replica of a service enforces one limit.
///
/// - Every decision is decided by one Lua function (`FCALL`, or a script by `EVALSHA` where the
///   server has no functions) over the keys of one hash slot: all rules of a policy are checked
///   and counted atomically, all or nothing. Concurrent decisions of a policy travel together,
///   one call deciding each in turn ([`batch`](RedisStoreBuilder::batch)).
/// - Time is read inside the script (Redis `TIME`), so application hosts with skewed clocks
///   agree.
/// - A denied request writes nothing; every write sets a TTL; long or binary client keys are
///   stored as digests.
/// - One multiplexed connection carries every decision; a broken one is replaced through the
///   deadpool-redis pool, with backoff, so an outage costs no round trips.
/// - Configured by a URL ([`open`](Self::open), [`builder`](Self::builder)) or by a
///   [`deadpool_redis::Config`] ([`from_config`](Self::from_config)), as deadpool-redis users
///   already configure Redis.
/// - [`reset`](Store::reset) deletes a client's state and reaches every instance sharing the key
///   prefix: each store that remembers something (a denial cache, on by default; quota leases)
///   listens for resets on a pub/sub connection of its own, on the channel `<prefix>:reset`.
///
/// Keys look like `<prefix>:<rule>:<code>:{<client key>}`, the code naming the algorithm and the
/// time base of its state (`fw-1h`, `log-1m`, `sw60-1h`, `tb20-10/1s`, `gcra-10/1s`: a changed
/// period or rate starts fresh state under a new key); see `docs/algorithms.md`.
///
/// ```no_run
/// use tower_redis_ratelimit::RedisStore;
///
/// let store = RedisStore::open("redis://127.0.0.1:6379")?;
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Arc<SharedConnection>,
    prefix: Box<str>,
    /// The time sent with each call instead of Redis's own, when set (tests).
    clock: Option<Arc<dyn Clock>>,
    /// The time the denial cache counts in: `clock`, or this process's.
    local_clock: Arc<dyn Clock>,
    /// Denials answered without Redis until they end (see `RedisStoreBuilder::denial_cache`).
    denials: Option<Denials>,
    /// Quota reserved here for hot keys (see `RedisStoreBuilder::quota_leases`).
    leases: Option<Leases>,
    /// Decisions while Redis fails (see `RedisStoreBuilder::fallback`).
    fallback: Option<Degraded>,
    /// Hears the resets made by every instance (see `RedisStore::reset`); none when this store
    /// remembers nothing to forget.
    listener: Option<reset::Listener>,
    /// Each rule's state name, the middle of its keys, per policy met.
    names: StateNames,
    /// Decisions of a policy with a call in flight, batched (see `RedisStoreBuilder::batch`).
    batcher: Batcher,
    batch: bool,
    /// Whether the store is on a Redis Cluster, where a batch holds the keys of one slot.
    cluster: bool,
    min_ttl_ms: u64,
    /// The server's address, without its password: `redacted_url`.
    redacted_url: Box<str>,
    #[cfg(feature = "concurrency")]
    heartbeat: Heartbeat,
}

impl RedisStore {
    /// A store for the Redis server at `url` (`redis://[user:password@]host[:port][/db]`,
    /// `rediss://` for TLS builds, `unix://` or `redis+unix://` for sockets) with default
    /// settings. Nothing connects until the first decision.
    pub fn open(url: &str) -> Result<Self, ConfigError> {
        Self::builder(url).build()
    }

    /// Settings for a store at `url`.
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder::new(connect::Target::Url(url.to_owned()))
    }

    /// Settings for a store on a Redis Cluster reached through any of `nodes` (node URLs, as for
    /// [`builder`](Self::builder); one is enough, more survive one being down when the store
    /// connects). Every call touches one hash slot (the client key is the hash tag; a batch holds
    /// one slot's requests), so every algorithm, multi-rule policy, concurrency limit and shedder
    /// works as on one server; redis-rs follows MOVED and ASK and refreshes the slot map after a
    /// failover, and a node without the function library gets it (`FUNCTION LOAD` on every
    /// primary). Nothing connects until the first decision.
    ///
    /// ```no_run
    /// use tower_redis_ratelimit::RedisStore;
    ///
    /// let store = RedisStore::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .prefix("app")
    ///     .build()?;
    /// assert_eq!(
    ///     store.redacted_url(),
    ///     "Redis Cluster redis://10.0.0.1:7000,redis://10.0.0.2:7000"
    /// );
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster<I, S>(nodes: I) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes = nodes
            .into_iter()
            .map(|url| url.as_ref().to_owned())
            .collect();
        RedisStoreBuilder::new(connect::Target::Cluster(nodes))
    }

    /// Settings for a store on the primary that the sentinels at `sentinels` (sentinel URLs,
    /// each with the sentinel's own user name and password) know as `master`. The primary and
    /// its replicas are reached with the first URL's database, and its user name and password
    /// unless [`primary_auth`](RedisStoreBuilder::primary_auth) gives theirs (a password on the
    /// servers and none, or another, on the sentinels). After a failover (`SENTINEL FAILOVER`, or a primary that died) the store finds
    /// the new primary by itself: a demoted primary answers READONLY, a dead one fails, and
    /// either way the store asks the sentinels again on its next connection. Nothing connects
    /// until the first decision.
    ///
    /// ```no_run
    /// use tower_redis_ratelimit::RedisStore;
    ///
    /// let store = RedisStore::sentinel(
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    ///     "limits",
    /// )
    /// .build()?;
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    ///
    /// envoyproxy/ratelimit's `REDIS_AUTH` (the servers') and `REDIS_SENTINEL_AUTH` (the
    /// sentinels'):
    ///
    /// ```no_run
    /// use tower_redis_ratelimit::RedisStore;
    /// use tower_redis_ratelimit::store::RedisAuth;
    ///
    /// let store = RedisStore::sentinel(["redis://:sentinels-secret@10.0.0.1:26379"], "limits")
    ///     .primary_auth(RedisAuth::password("servers-secret"))
    ///     .build()?;
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub fn sentinel<I, S>(sentinels: I, master: &str) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let sentinels = sentinels
            .into_iter()
            .map(|url| url.as_ref().to_owned())
            .collect();
        RedisStoreBuilder::new(connect::Target::Sentinel {
            sentinels,
            master: master.to_owned(),
            primary_auth: None,
        })
    }

    /// A store configured by a [`deadpool_redis::Config`] (its `url` or `connection`, and its
    /// create timeout), with default settings otherwise; see
    /// [`RedisStoreBuilder::from_config`] for what is used. Nothing connects until the first
    /// decision.
    ///
    /// The config deserializes with serde (this crate turns on deadpool-redis's `serde` feature),
    /// from a file or from environment variables as deadpool-redis documents:
    ///
    /// ```
    /// use tower_redis_ratelimit::RedisStore;
    ///
    /// let config: deadpool_redis::Config = serde_json::from_str(
    ///     r#"{
    ///         "url": "redis://app:s3cret@10.0.0.5:6379/2",
    ///         "pool": { "max_size": 16, "timeouts": { "create": { "secs": 2, "nanos": 0 } } }
    ///     }"#,
    /// )?;
    /// let store = RedisStore::from_config(config)?;
    /// assert_eq!(store.redacted_url(), "redis://app:***@10.0.0.5:6379/2");
    ///
    /// // Connection settings instead of a URL; setting both is a configuration error.
    /// let both: deadpool_redis::Config = serde_json::from_str(
    ///     r#"{
    ///         "url": "redis://10.0.0.5:6379",
    ///         "connection": {
    ///             "addr": { "Tcp": ["10.0.0.5", 6379] },
    ///             "db": 2, "username": "app", "password": "s3cret", "protocol": "RESP2"
    ///         }
    ///     }"#,
    /// )?;
    /// let error = RedisStore::from_config(both).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "invalid store configuration: the deadpool_redis::Config sets both `url` and \
    ///      `connection`: set one of them"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_config(config: deadpool_redis::Config) -> Result<Self, ConfigError> {
        RedisStoreBuilder::from_config(config).build()
    }

    /// The Redis keys that `policy` keeps for the client `key`, one per rule in rule order (for
    /// inspection, e.g. `MEMORY USAGE`). A key exists only while its rule has state that
    /// matters. To give a client a fresh quota, [reset](Store::reset) it rather than delete
    /// these: every instance's denial cache and quota leases would go on answering from what
    /// they remember.
    ///
    /// ```
    /// use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, key::Key};
    ///
    /// let store = RedisStore::builder("redis://127.0.0.1:6379").prefix("app").build()?;
    /// let policy = Policy::new([
    ///     Rule::gcra("second", Quota::per_second(10)),
    ///     Rule::sliding_window("hour", Quota::per_hour(1_000), 60),
    /// ])?;
    /// assert_eq!(
    ///     store.state_keys(&Key::from("203.0.113.5"), &policy),
    ///     ["app:second:gcra-10/1s:{203.0.113.5}", "app:hour:sw60-1h:{203.0.113.5}"]
    /// );
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn state_keys(&self, key: &Key, policy: &Policy) -> Vec<String> {
        let client = StorageKey::new(key);
        policy
            .rules()
            .iter()
            .map(|rule| script::state_key(&self.inner.prefix, rule, client.as_str()))
            .collect()
    }

    /// The server's URL with its password replaced by `***`, for logs and start-up messages. A
    /// store configured with connection settings rather than a URL shows them as one:
    /// `redis://[user:***@]host:port/db`, `rediss://` for TLS, `redis+unix:///path?db=N` for a
    /// socket.
    ///
    /// ```
    /// use tower_redis_ratelimit::RedisStore;
    ///
    /// let store = RedisStore::open("redis://app:s3cret@127.0.0.1:6379/2")?;
    /// assert_eq!(store.redacted_url(), "redis://app:***@127.0.0.1:6379/2");
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn redacted_url(&self) -> String {
        self.inner.redacted_url.to_string()
    }

    /// Gives back to Redis the quota this process holds in leases and has not spent (see
    /// [`RedisStoreBuilder::quota_leases`]), for a graceful shutdown: other instances can then use
    /// it at once rather than when the leases would have expired. Grants in flight are waited for
    /// and given back as they land (a call to a silent server ends within `stale_after`).
    /// Requests checked afterwards may take new leases. Returns the first error if some could not
    /// be given back; Redis then returns those units with time. Without leases, does nothing.
    pub async fn return_leases(&self) -> Result<(), StoreError> {
        leases::return_all(&self.inner).await
    }

    /// Sends a PING: a readiness check for the store (connecting first if needed).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _: String = self.inner.connection.query(&redis::cmd("PING")).await?;
        Ok(())
    }
}

impl RedisStore {
    /// The one path of [`Store::check`] and [`Store::check_verdicts`]: a remembered denial, the
    /// fallback while its breaker is open, a quota lease, else Redis's script (batched), guarded
    /// by the fallback.
    fn decide<A: Answer>(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<A> {
        let inner = &self.inner;
        reset::Listener::ensure(inner);
        // Read before the call is sent: a denial remembered from its answer ends no later than
        // Redis's, whatever the call's latency.
        let asked = inner.local_clock.now_micros();
        if let Some(decision) = inner
            .denials
            .as_ref()
            .and_then(|denials| denials.answer(key, policy, cost, asked))
        {
            crate::telemetry::denial_cache_hit();
            return StoreFuture::ready(Ok(A::decided(decision)));
        }
        let pass = match fallback::instead(inner, key, policy, cost) {
            Ok(pass) => pass,
            Err(answer) => return A::of(answer),
        };
        let decided = match inner
            .leases
            .as_ref()
            .and_then(|leases| leases::decide(inner, leases, key, policy, cost, asked))
        {
            Some(answer) => A::of(answer),
            None => batch::decide(inner, key, policy, cost, asked),
        };
        fallback::guard(inner, decided, pass, key, policy, cost)
    }
}

impl Store for RedisStore {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        self.decide(key, policy, cost)
    }

    /// Every rule's verdict from the script's reply: one call, as [`check`](Self::check). An
    /// answer made in process (a remembered denial, a quota lease, the fallback) knows the
    /// decision only: the other rules are read after it, as the default does.
    fn check_verdicts(
        self: Arc<Self>,
        key: &Key,
        policy: &Policy,
        cost: u32,
    ) -> StoreFuture<Verdicts> {
        let decided: StoreFuture<Verdicts> = self.decide(key, policy, cost);
        let (key, policy) = (key.clone(), policy.clone());
        StoreFuture::new(async move {
            let answer = decided.await?;
            super::read_verdicts(&*self, &key, &policy, answer).await
        })
    }

    /// Deletes the state of `policy`'s rules for `key` in Redis and, in the same atomic call,
    /// publishes the reset on `<prefix>:reset`: every instance sharing the key prefix forgets
    /// the denials and quota leases it holds of that state (this one at once, the others as
    /// they hear it, within a round trip). Its own fallback's counts are reset too.
    ///
    /// An instance that was not subscribed when the reset was published (its subscription
    /// broke: a restart, a failover, a partition) forgets everything it remembered once it
    /// subscribes again, so a missed reset cannot keep a client refused. On a cluster the
    /// listener subscribes on any node (a PUBLISH reaches them all); on Sentinel, on the
    /// primary. Not bounded by a layer's deadline: bound it yourself.
    ///
    /// ```no_run
    /// use tower_redis_ratelimit::key::Key;
    /// use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};
    ///
    /// # async fn lift() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::open("redis://127.0.0.1:6379")?;
    /// let policy = Policy::try_from(Rule::gcra("api", Quota::per_minute(60)))?;
    /// store.reset(&Key::from("203.0.113.5"), &policy).await?;
    /// # Ok(())
    /// # }
    /// ```
    fn reset(&self, key: &Key, policy: &Policy) -> StoreFuture<()> {
        StoreFuture::new(reset::reset(
            self.inner.clone(),
            key.clone(),
            policy.clone(),
        ))
    }

    fn fallback_timeout(&self) -> Option<Duration> {
        self.inner.fallback.as_ref().map(Degraded::timeout)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.inner.redacted_url)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}
