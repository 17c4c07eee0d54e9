//! [`RedisStoreBuilder`]: a Redis store's settings, from a URL or a `deadpool_redis::Config`.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::ConnectionInfo;

use super::connect::{self, RedisTls, SharedConnection, Target};
use super::key::StateNames;
use super::local::{Batcher, Degraded, Denials, Fallback, Leases, QuotaLeases};
use super::reset::{self, Listener};
use super::{Inner, RedisStore};
use crate::clock::{Clock, SystemClock};
use crate::error::{ConfigError, StoreConfigError};
use crate::store::MemoryStore;
#[cfg(feature = "concurrency")]
use crate::store::permits::heartbeat::Heartbeat;

/// The longest reconnect backoff accepted: longer would keep limiting off for that long after
/// Redis returns.
const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// Settings for a [`RedisStore`]: from [`RedisStore::builder`] (a URL) or
/// [`RedisStoreBuilder::from_config`] (a [`deadpool_redis::Config`]).
#[must_use]
pub struct RedisStoreBuilder {
    target: Target,
    prefix: String,
    connect_timeout: Duration,
    stale_after: Duration,
    backoff: (Duration, Duration),
    clock: Option<Arc<dyn Clock>>,
    denial_cache: usize,
    quota_leases: Option<QuotaLeases>,
    fallback: Option<Fallback>,
    batch: bool,
    functions: bool,
    tls: Option<RedisTls>,
    /// [`primary_auth`](Self::primary_auth) given to a store not on Sentinel: refused at
    /// `build`, where a builder's mistakes are told.
    #[cfg(feature = "sentinel")]
    misplaced_primary_auth: bool,
}

/// How many denials a store remembers unless told otherwise: at 200 bytes or so each, 20 MB.
const DEFAULT_DENIAL_CACHE: usize = 100_000;

impl RedisStoreBuilder {
    pub(super) fn new(target: Target) -> Self {
        Self {
            target,
            prefix: "ratelimit".to_owned(),
            connect_timeout: Duration::from_secs(1),
            stale_after: Duration::from_secs(2),
            backoff: (Duration::from_millis(50), Duration::from_secs(1)),
            clock: None,
            denial_cache: DEFAULT_DENIAL_CACHE,
            quota_leases: None,
            fallback: None,
            batch: true,
            functions: true,
            tls: None,
            #[cfg(feature = "sentinel")]
            misplaced_primary_auth: false,
        }
    }

    /// Settings for a store configured the way deadpool-redis is, by a
    /// [`deadpool_redis::Config`] (deserialized with serde, e.g. from environment variables with
    /// the `config` crate). The other settings keep their defaults until changed here; a
    /// setting made after this call wins.
    ///
    /// What the store takes from the config:
    /// - `url` (as for [`RedisStore::builder`]) or `connection` (address: TCP, TLS or a Unix
    ///   socket; database, username, password, protocol), not both; neither means
    ///   `127.0.0.1:6379`, as for deadpool-redis;
    /// - `pool.timeouts.create`, when set, as the [connect timeout](Self::connect_timeout);
    ///   unset, the store keeps its own 1 s (an unbounded attempt would hold off every
    ///   reconnect for as long as a dropped SYN takes).
    ///
    /// `pool.max_size`, `pool.timeouts.wait`, `pool.timeouts.recycle` and `pool.queue_mode` do
    /// not apply: the store keeps one multiplexed connection for every decision and uses the
    /// pool only to make a replacement, so nothing waits for a slot and nothing is recycled.
    ///
    /// A config that sets both `url` and `connection`, a URL that does not parse or a zero
    /// create timeout is a [`ConfigError`] from [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tower_redis_ratelimit::store::RedisStoreBuilder;
    ///
    /// // REDIS__URL=redis://app:s3cret@redis.internal:6379/2
    /// // REDIS__POOL__MAX_SIZE=16
    /// // REDIS__POOL__TIMEOUTS__CREATE__SECS=2
    /// // REDIS__POOL__TIMEOUTS__CREATE__NANOS=0
    /// #[derive(serde::Deserialize)]
    /// struct Settings {
    ///     redis: deadpool_redis::Config,
    /// }
    ///
    /// let settings: Settings = config::Config::builder()
    ///     .add_source(config::Environment::default().separator("__"))
    ///     .build()?
    ///     .try_deserialize()?;
    /// let store = RedisStoreBuilder::from_config(settings.redis)
    ///     .prefix("checkout")
    ///     .stale_after(Duration::from_secs(1))
    ///     .build()?;
    /// println!("rate limits in {}", store.redacted_url());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_config(config: deadpool_redis::Config) -> Self {
        let target = match (config.url, config.connection) {
            (Some(url), None) => Target::Url(url),
            (None, Some(connection)) => Target::Connection(connection),
            (None, None) => Target::Connection(ConnectionInfo::default()),
            (Some(_), Some(_)) => Target::UrlAndConnection,
        };
        let mut builder = Self::new(target);
        if let Some(create) = config.pool.and_then(|pool| pool.timeouts.create) {
            builder.connect_timeout = create;
        }
        builder
    }

    /// The first part of every key (default `ratelimit`): separates applications sharing one
    /// Redis. Printable ASCII without spaces or braces, at most 64 characters.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long establishing a connection may take (default 1 s, above zero). Requests never
    /// wait longer than the layer's deadline; this bounds the background attempt.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a connection may leave a request unanswered before it is presumed dead and
    /// replaced (default 2 s, above zero). Catches partitions and frozen servers, where TCP stays
    /// open.
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = after;
        self
    }

    /// The wait after a failed connection attempt: `first`, doubling per further failure, at most
    /// `max` (default 50 ms to 1 s; `max` at most an hour). Calls during the wait fail at once,
    /// without network.
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

    /// How many denials this process remembers to answer without Redis (default 100,000; 0 turns
    /// the cache off).
    ///
    /// Once Redis has denied a request of cost 1 for a key until T, every such request of that
    /// key and policy is denied until T whatever other instances do (capacity only comes back
    /// with time), so the store answers it in process, with no network call, with Redis's own
    /// decision aged by the time since: the same status, counts, reset instant, and a
    /// `Retry-After` counting down. Abusive traffic then costs Redis about one call per retry
    /// period. The answer assumes Redis's state only moves forward: a key deleted by hand, or a
    /// quota raised under the same rule name, is seen once the remembered wait is over; a
    /// [reset](crate::Store::reset) reaches every instance's cache at once. Requests
    /// of other costs always ask Redis. When the table is full, the denial that ends soonest is
    /// forgotten first.
    pub fn denial_cache(mut self, max_entries: usize) -> Self {
        self.denial_cache = max_entries;
        self
    }

    /// Whether decisions of a policy that arrive while a call of it is in flight wait and go to
    /// Redis together, as one call that decides each of them in turn, whatever their keys
    /// (default on). Exact: Redis decides them one after another in the order they arrived, as if
    /// each had been sent alone after the one before it; a busy process then costs Redis one call
    /// per batch (up to 128 requests) instead of one per request, a hot key one round trip per
    /// batch, and a request of a policy with no call in flight is sent at once, as without it.
    /// On a Redis Cluster a batch holds the requests of one hash slot (one client's, mostly).
    pub fn batch(mut self, batch: bool) -> Self {
        self.batch = batch;
        self
    }

    /// Whether to call the scripts as Redis Functions where the server has them (Redis 7+;
    /// default on): the library (`FUNCTION LOAD`) defines the shared helpers and every algorithm
    /// once, so a call (`FCALL`) runs only its own work; a server without the library (restarted
    /// without persistence, flushed, a new node) gets it loaded on the call that finds it
    /// missing. Off, on Redis 6.2 (a server that does not know `FCALL`), or for a user the
    /// server does not allow `FUNCTION LOAD`, each call is an `EVALSHA` of a script that defines
    /// what it uses on every call, loaded on `NOSCRIPT`. On, the store's user needs `FCALL` and
    /// `FUNCTION LOAD` rather than `EVALSHA` and `SCRIPT LOAD` (`docs/operations.md`).
    pub fn functions(mut self, functions: bool) -> Self {
        self.functions = functions;
        self
    }

    /// Turns on quota leases (off by default): local-first decisions for hot keys, for a bounded
    /// price in exactness.
    ///
    /// A key that this process sees often gets a slice of its remaining quota reserved in Redis
    /// with one call, sized to what the key asked here in the last
    /// [`lifetime`](QuotaLeases::lifetime), and its requests are answered from the slice with no
    /// network call; what is left goes back to Redis when the lifetime ends, and on
    /// [`RedisStore::return_leases`]. A hot key then costs Redis about two calls per lifetime
    /// rather than one per request.
    ///
    /// For GCRA and the token bucket a slice is a rate: it may hold units past the bucket's
    /// capacity, those that drain back within the lifetime, each spent no earlier than it
    /// conforms (a request before then is refused here, with the wait to it). So a key offered
    /// more than its rate stays local too: one grant per lifetime, its requests refused or
    /// admitted here as Redis would pace them. A grant Redis refused is answered here until its
    /// wait ends. A key asked less than twice a lifetime here costs the leases one atomic
    /// counter, no lock and no entry.
    ///
    /// The fleet never spends more than Redis granted, but exactness changes in two ways:
    /// - an instance may deny while others hold unspent slices: at most N ×
    ///   [`max_share`](QuotaLeases::max_share) of what a rule gives in a lifetime (its capacity,
    ///   and for a bucket what drains back meanwhile) is held at once (N instances);
    /// - for GCRA and the token bucket, a unit counts at the instant it conforms in Redis and may
    ///   be spent up to a lifetime later, so over any interval the fleet admits at most the
    ///   rule's burst plus its rate over the interval and one lifetime. A fixed window's slices
    ///   are spent within their window: no over-admission.
    ///
    /// Only policies whose rules are all fixed window, GCRA or token bucket are leased (the
    /// sliding algorithms remember when each unit was spent, which a slice cannot give back);
    /// others, keys seen rarely, and keys beyond [`max_keys`](QuotaLeases::max_keys) are decided
    /// by Redis exactly. `docs/performance.md` measures the error against the exact mode.
    pub fn quota_leases(mut self, leases: QuotaLeases) -> Self {
        self.quota_leases = Some(leases);
        self
    }

    /// Turns on a fallback (off by default): while Redis fails, decisions come from a local
    /// [`MemoryStore`](crate::MemoryStore) with every quota divided by
    /// [`Fallback::new`]'s number of instances, instead of the layer's failure mode.
    ///
    /// - A Redis call that fails, or takes longer than the fallback's
    ///   [`timeout`](Fallback::timeout), is answered by the fallback; the decision says so
    ///   ([`Decision::is_degraded`](crate::Decision::is_degraded), and
    ///   `Rate-Limiting-State: Degraded` on the response, admitted or refused).
    /// - After [`failures`](Fallback::failures) such calls in a row, no call goes to Redis for a
    ///   [`cool_down`](Fallback::cool_down): a dead or frozen Redis costs requests no latency.
    ///   Then one request probes Redis; its success returns every decision to Redis, its failure
    ///   starts another cool-down, so Redis's return causes no stampede.
    /// - Each instance counts its own share: the fleet admits about the quota while every
    ///   instance takes its share of the traffic, less when traffic is uneven, and a client
    ///   starts afresh in the fallback (and again in Redis when it returns, where its earlier
    ///   count may still stand): up to its share more, each way.
    /// - A call that was sent and timed out (a frozen or partitioned Redis) may still run when
    ///   Redis resumes: its request is then counted twice, by the fallback and by Redis, so
    ///   after the outage the key finds that much more used in Redis than it was admitted (an
    ///   under-admission). Per instance, at most the calls sent from when Redis stopped
    ///   answering until the breaker opened (the [`failures`](Fallback::failures) calls that
    ///   timed out, and whatever was sent while they waited: about one
    ///   [`timeout`](Fallback::timeout) of the instance's traffic to Redis), plus each probe
    ///   that timed out; a key's share of them is its share of that traffic.
    /// - Redis errors are counted (`ratelimit_store_errors_total`) though the fallback answers.
    /// - The fallback's timeout must be below the deadline of every rate limit on the store:
    ///   building a layer whose deadline is not fails, naming both.
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// A store on Sentinel ([`RedisStore::sentinel`]): how the primary, and the replica a
    /// failover promotes, are authenticated, when not as the sentinels are. The sentinels' URLs
    /// carry the sentinels' own user name and password (envoyproxy/ratelimit's
    /// `REDIS_SENTINEL_AUTH`), this the servers' (its `REDIS_AUTH`): a password on the servers
    /// and none on the sentinels, or the reverse
    /// ([`RedisAuth::none`](crate::store::RedisAuth::none)), or two different ones. Unset, the
    /// servers get the first sentinel URL's. Another kind of store refuses it at
    /// [`build`](Self::build): its URL says how it authenticates.
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub fn primary_auth(mut self, auth: super::connect::RedisAuth) -> Self {
        match &mut self.target {
            Target::Sentinel { primary_auth, .. } => *primary_auth = Some(auth),
            _ => self.misplaced_primary_auth = true,
        }
        self
    }

    /// The certificates of a store on `rediss://` URLs (with the `tls` feature): a CA to verify
    /// the servers with instead of Mozilla's roots, and a client certificate for servers that
    /// require one (`tls-auth-clients yes`). Every connection of the store uses them: decisions,
    /// the reset listener's subscription, and on Sentinel the sentinels and the primary they
    /// name, on a Cluster every node. The server's certificate is always verified, its name
    /// (or IP address) against the URL's host; without this call a `rediss://` URL is verified
    /// against Mozilla's roots.
    ///
    /// [`build`](Self::build) refuses certificates that do not parse (naming the part), given to
    /// a store whose URL is not `rediss://`, or a `rediss://…#insecure` URL, whose server would
    /// go unverified.
    ///
    /// ```no_run
    /// use tower_redis_ratelimit::store::{RedisStore, RedisTls};
    ///
    /// let tls = RedisTls::new()
    ///     .ca(std::fs::read("/etc/redis/ca.pem")?)
    ///     .client_certificate(
    ///         std::fs::read("/etc/redis/client.pem")?,
    ///         std::fs::read("/etc/redis/client.key")?,
    ///     );
    /// let store = RedisStore::builder("rediss://app:s3cret@redis.internal:6380")
    ///     .tls(tls)
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: RedisTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The store. Validates the settings; does not connect.
    pub fn build(self) -> Result<RedisStore, ConfigError> {
        #[cfg(feature = "sentinel")]
        if self.misplaced_primary_auth {
            return Err(StoreConfigError::PrimaryAuthWithoutSentinel.into());
        }
        validate_prefix(&self.prefix)?;
        if self.connect_timeout.is_zero() {
            return Err(StoreConfigError::ZeroConnectTimeout.into());
        }
        if self.stale_after.is_zero() {
            return Err(StoreConfigError::ZeroStaleAfter.into());
        }
        if self.backoff.1 > MAX_BACKOFF {
            return Err(StoreConfigError::BackoffTooLong {
                backoff: self.backoff.1,
                max: MAX_BACKOFF,
            }
            .into());
        }
        if let Some(leases) = &self.quota_leases {
            leases.validate()?;
        }
        if let Some(fallback) = &self.fallback {
            fallback.validate()?;
        }
        #[cfg(feature = "cluster")]
        let cluster = matches!(self.target, Target::Cluster(_));
        #[cfg(not(feature = "cluster"))]
        let cluster = false;
        let endpoint = connect::connector(self.target, self.tls.as_ref(), self.connect_timeout)?;
        // A store that remembers nothing (no denial cache, no leases) has nothing to forget on a
        // reset, and needs no listener.
        let listener = (self.denial_cache > 0 || self.quota_leases.is_some()).then(|| {
            Listener::new(
                endpoint.subscribe,
                reset::channel(&self.prefix),
                self.stale_after,
                self.backoff,
            )
        });
        // The fallback counts in the store's clock, so that tests driving it see both agree.
        let fallback = self.fallback.as_ref().map(|fallback| {
            let memory = match &self.clock {
                Some(clock) => MemoryStore::builder().clock(clock.clone()).build(),
                None => MemoryStore::new(),
            };
            Degraded::new(fallback, memory)
        });
        let min_ttl_ms = if self.clock.is_some() {
            10 * 60 * 1000
        } else {
            0
        };
        Ok(RedisStore {
            inner: Arc::new(Inner {
                connection: SharedConnection::new(
                    endpoint.connect,
                    self.stale_after,
                    self.backoff,
                    self.functions,
                ),
                prefix: self.prefix.into(),
                local_clock: self
                    .clock
                    .clone()
                    .unwrap_or_else(|| Arc::new(SystemClock::new())),
                clock: self.clock,
                denials: (self.denial_cache > 0).then(|| Denials::new(self.denial_cache)),
                leases: self.quota_leases.as_ref().map(Leases::new),
                fallback,
                names: StateNames::new(),
                batcher: Batcher::new(),
                batch: self.batch,
                cluster,
                min_ttl_ms,
                listener,
                redacted_url: endpoint.shown.into(),
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
        Err(StoreConfigError::InvalidPrefix {
            prefix: prefix.to_owned(),
        }
        .into())
    }
}

#[cfg(test)]
mod tests;
