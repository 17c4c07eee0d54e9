//! The Redis store: state shared by every replica, one atomic script call per decision.

mod builder;
mod connection;
#[cfg(feature = "concurrency")]
mod permits;
mod script;

use std::fmt;
use std::sync::Arc;

pub use self::builder::RedisStoreBuilder;
use self::connection::SharedConnection;
use super::denials::Denials;
use super::key::StorageKey;
#[cfg(feature = "concurrency")]
use super::lease::heartbeat::Heartbeat;
use super::{Store, StoreError, StoreFuture};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::key::Key;
use crate::policy::Policy;

/// State shared in Redis, so every replica of a service enforces one limit.
///
/// - Every decision is one call of one Lua script (EVALSHA) over the keys of one hash slot: all
///   rules of a policy are checked and counted atomically, all or nothing.
/// - Time is read inside the script (Redis `TIME`), so application hosts with skewed clocks
///   agree.
/// - A denied request writes nothing; every write sets a TTL; long or binary client keys are
///   stored as digests.
/// - One multiplexed connection carries every decision; a broken one is replaced through the
///   deadpool-redis pool, with backoff, so an outage costs no round trips.
/// - Configured by a URL ([`open`](Self::open), [`builder`](Self::builder)) or by a
///   [`deadpool_redis::Config`] ([`from_config`](Self::from_config)), as deadpool-redis users
///   already configure Redis.
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
        RedisStoreBuilder::new(builder::Target::Url(url.to_owned()))
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
    /// inspection, e.g. `MEMORY USAGE`, or to reset a client by deleting them). A key exists only
    /// while its rule has state that matters.
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

    /// Sends a PING: a readiness check for the store (connecting first if needed).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _: String = self.inner.connection.query(&redis::cmd("PING")).await?;
        Ok(())
    }
}

impl Store for RedisStore {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        let inner = &self.inner;
        // Read before the call is sent: a denial remembered from its answer ends no later than
        // Redis's, whatever the call's latency.
        let asked = inner.local_clock.now_micros();
        if let Some(decision) = inner
            .denials
            .as_ref()
            .and_then(|denials| denials.answer(key, policy, cost, asked))
        {
            return StoreFuture::ready(Ok(decision));
        }
        let client = StorageKey::new(key);
        let now = inner.clock.as_ref().map(|clock| clock.now_micros());
        let invocation = script::invocation(
            &inner.prefix,
            client.as_str(),
            policy,
            cost,
            now,
            inner.min_ttl_ms,
        );
        let (inner, key, policy) = (inner.clone(), key.clone(), policy.clone());
        StoreFuture::new(async move {
            let reply: Vec<i64> = inner.connection.invoke(&invocation).await?;
            let decision = script::decision(&reply, &policy)?;
            if let Some(denials) = &inner.denials {
                denials.learn(&key, &policy, cost, asked, &decision);
            }
            Ok(decision)
        })
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
