//! The Redis store: state shared by every replica, one atomic script call per decision.

mod connection;
#[cfg(feature = "concurrency")]
mod permits;
mod script;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use redis::AsyncConnectionConfig;

use self::connection::SharedConnection;
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
    clock: Option<Arc<dyn Clock>>,
    min_ttl_ms: u64,
    url: Box<str>,
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
        RedisStoreBuilder {
            url: url.to_owned(),
            prefix: "ratelimit".to_owned(),
            connect_timeout: Duration::from_secs(1),
            stale_after: Duration::from_secs(2),
            backoff: (Duration::from_millis(50), Duration::from_secs(1)),
            clock: None,
        }
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

    /// The server's URL with its password replaced by `***`, for logs and start-up messages.
    ///
    /// ```
    /// use tower_redis_ratelimit::RedisStore;
    ///
    /// let store = RedisStore::open("redis://app:s3cret@127.0.0.1:6379/2")?;
    /// assert_eq!(store.redacted_url(), "redis://app:***@127.0.0.1:6379/2");
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn redacted_url(&self) -> String {
        redact(&self.inner.url)
    }

    /// Sends a PING: a readiness check for the store (connecting first if needed).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut lease = self.inner.connection.get().await?;
        lease.health.sending(self.inner.connection.now_ms());
        let reply: Result<String, _> = redis::cmd("PING").query_async(&mut lease.connection).await;
        match reply {
            Ok(_) => {
                lease.health.answered();
                Ok(())
            }
            Err(err) => Err(self.inner.connection.failed(&lease, err)),
        }
    }
}

impl Store for RedisStore {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        let inner = &self.inner;
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
        let connection = inner.connection.clone();
        let policy = policy.clone();
        StoreFuture::new(async move {
            let reply: Vec<i64> = connection.invoke(&invocation).await?;
            script::decision(&reply, &policy)
        })
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &redact(&self.inner.url))
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

/// Settings for a [`RedisStore`].
#[must_use]
pub struct RedisStoreBuilder {
    url: String,
    prefix: String,
    connect_timeout: Duration,
    stale_after: Duration,
    backoff: (Duration, Duration),
    clock: Option<Arc<dyn Clock>>,
}

impl RedisStoreBuilder {
    /// The first part of every key (default `ratelimit`): separates applications sharing one
    /// Redis. Printable ASCII without spaces or braces, at most 64 characters.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long establishing a connection may take (default 1 s). Requests never wait longer
    /// than the layer's deadline; this bounds the background attempt.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a connection may leave a request unanswered before it is presumed dead and
    /// replaced (default 2 s). Catches partitions and frozen servers, where TCP stays open.
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = after;
        self
    }

    /// The wait after a failed connection attempt: `first`, doubling per further failure, at most
    /// `max` (default 50 ms to 1 s). Calls during the wait fail at once, without network.
    pub fn reconnect_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = (first, max.max(first));
        self
    }

    /// Sends the time from `clock` instead of reading the Redis server clock. Meant for tests that
    /// drive time by hand (the conformance suite does). Since such a clock may run slower than
    /// real time, written keys then live at least ten minutes, so Redis never expires state that
    /// is still live in the caller's time; the scripts ignore stale state by its content.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The store. Validates the settings; does not connect.
    pub fn build(self) -> Result<RedisStore, ConfigError> {
        validate_prefix(&self.prefix)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(None);
        let manager = Manager::new_with_config(self.url.as_str(), config).map_err(|err| {
            ConfigError::Store(format!("invalid Redis URL {}: {err}", redact(&self.url)))
        })?;
        let pool = Pool::builder(manager)
            .max_size(2)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(self.connect_timeout))
            .wait_timeout(Some(self.connect_timeout))
            .build()
            .map_err(|err| ConfigError::Store(format!("cannot build the Redis pool: {err}")))?;
        let min_ttl_ms = if self.clock.is_some() {
            10 * 60 * 1000
        } else {
            0
        };
        Ok(RedisStore {
            inner: Arc::new(Inner {
                connection: SharedConnection::new(pool, self.stale_after, self.backoff),
                prefix: self.prefix.into(),
                clock: self.clock,
                min_ttl_ms,
                url: self.url.into(),
                #[cfg(feature = "concurrency")]
                heartbeat: Heartbeat::new(),
            }),
        })
    }
}

fn validate_prefix(prefix: &str) -> Result<(), ConfigError> {
    let valid = !prefix.is_empty()
        && prefix.len() <= 64
        && prefix
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'{' | b'}'));
    if valid {
        Ok(())
    } else {
        Err(ConfigError::Store(format!(
            "invalid key prefix {prefix:?}: use 1 to 64 printable ASCII characters without spaces or braces"
        )))
    }
}

/// The URL without its password, for logs and errors.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_and_prefixes_are_configuration_errors() {
        assert!(matches!(
            RedisStore::open("http://localhost"),
            Err(ConfigError::Store(_))
        ));
        assert!(matches!(
            RedisStore::builder("redis://localhost")
                .prefix("a{b}")
                .build(),
            Err(ConfigError::Store(_))
        ));
        assert!(matches!(
            RedisStore::builder("redis://localhost").prefix("").build(),
            Err(ConfigError::Store(_))
        ));
        assert!(RedisStore::open("redis://127.0.0.1:6379/2").is_ok());
    }

    #[test]
    fn passwords_never_reach_logs() {
        assert_eq!(
            redact("redis://user:secret@host:6379"),
            "redis://user:***@host:6379"
        );
        assert_eq!(redact("redis://:secret@host"), "redis://:***@host");
        assert_eq!(redact("redis://host"), "redis://host");
        let error = RedisStore::open("http://user:secret@host")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("secret"), "{error}");
    }
}
