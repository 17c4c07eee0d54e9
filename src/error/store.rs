//! [`StoreConfigError`]: what is wrong with a store's settings.

use std::time::Duration;

/// A store setting is invalid; each variant names the setting (as
/// [`RedisStoreBuilder`](crate::store::RedisStoreBuilder) and the configuration file call it) and
/// the value refused. URLs are shown without their passwords.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreConfigError {
    /// A Redis URL does not parse: `setting` is `url`, `nodes` (a cluster's) or `sentinels`.
    #[error(
        "invalid {} URL {url}: {reason} (write redis://[user:password@]host[:port][/db])",
        role(setting)
    )]
    InvalidUrl {
        /// `url`, `nodes` or `sentinels`.
        setting: &'static str,
        /// The URL, its password shown as `***`.
        url: String,
        /// What redis-rs found wrong.
        reason: String,
    },
    /// A cluster without nodes, Sentinel without sentinels.
    #[error("{} needs at least one URL (`{setting}`)", role(setting))]
    NoUrls {
        /// `nodes` or `sentinels`.
        setting: &'static str,
    },
    /// A Redis address without a host.
    #[error("the Redis address {address} has no host: name the server to connect to")]
    NoHost {
        /// The address, its password shown as `***`.
        address: String,
    },
    /// A `deadpool_redis::Config` that sets both `url` and `connection`.
    #[error("the deadpool_redis::Config sets both `url` and `connection`: set one of them")]
    UrlAndConnection,
    /// An address this build of redis-rs cannot reach (a Unix socket off Unix).
    #[error("cannot connect to {address} on this platform (Unix sockets need a Unix platform)")]
    Unsupported {
        /// The address, its password shown as `***`.
        address: String,
    },
    /// A `rediss://` address in a build without the crate's `tls` feature.
    #[error(
        "cannot connect to {address}: TLS to Redis (rediss://) needs the `tls` feature of \
         tower-redis-ratelimit"
    )]
    TlsFeature {
        /// The address, its password shown as `***`.
        address: String,
    },
    /// A `rediss://…#insecure` address: the server's certificate would go unverified.
    #[error(
        "{address} asks for TLS without verifying the server (#insecure), which this crate never \
         does: give the CA that signed the server's certificate instead (`tls.ca`)"
    )]
    InsecureTls {
        /// The address, its password shown as `***`.
        address: String,
    },
    /// Certificates given to a store whose address is not `rediss://`.
    #[error(
        "TLS certificates are given for {address}, which is not a TLS address: write rediss:// \
         to connect with TLS"
    )]
    TlsWithoutRediss {
        /// The address, its password shown as `***`.
        address: String,
    },
    /// A TLS certificate or private key that does not parse.
    #[error("invalid TLS {part}: {reason}")]
    InvalidTls {
        /// `ca`, `certificate` or `private_key`.
        part: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// redis-rs refused the connection settings as a whole.
    #[error("invalid {what} settings: {reason}")]
    Client {
        /// `Redis connection`, `Redis Cluster`, `Redis Sentinel` or `Redis pool`.
        what: &'static str,
        /// What redis-rs said.
        reason: String,
    },
    /// Sentinel without the name of the primary.
    #[error("Redis Sentinel needs the name of the primary it watches (`master`)")]
    NoMaster,
    /// The primary's credentials given to a store that is not on Sentinel.
    #[error(
        "`primary_auth` is for a store on Redis Sentinel (the primary's credentials apart from \
         the sentinels'): a store's URL carries its user name and password"
    )]
    PrimaryAuthWithoutSentinel,
    /// A key prefix that is empty, too long, or holds spaces or braces.
    #[error(
        "invalid key prefix {prefix:?}: use 1 to 64 printable ASCII characters without spaces or braces"
    )]
    InvalidPrefix {
        /// The prefix refused.
        prefix: String,
    },
    /// A connect timeout of zero.
    #[error(
        "the connect timeout (a config's create timeout) is zero: give a connection time to be made, e.g. 1s"
    )]
    ZeroConnectTimeout,
    /// `stale_after` of zero.
    #[error(
        "`stale_after` is zero: a connection silent that long is replaced, so give it e.g. 10s"
    )]
    ZeroStaleAfter,
    /// A reconnect backoff above an hour.
    #[error(
        "the reconnect backoff of up to {backoff:?} is longer than {max:?}: use a shorter maximum"
    )]
    BackoffTooLong {
        /// The longest backoff asked for.
        backoff: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// A quota lease's lifetime of zero or above its maximum.
    #[error("a quota lease's lifetime must be above zero and at most {max:?}, not {lifetime:?}")]
    LeaseLifetime {
        /// The lifetime refused.
        lifetime: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// A quota lease's share outside (0, 1].
    #[error("a quota lease's max share must be in (0, 1], not {share}")]
    LeaseShare {
        /// The share refused.
        share: f64,
    },
    /// Quota leases with room for no key.
    #[error("quota leases need room for at least one key: set max_keys to 1 or more")]
    NoLeaseKeys,
    /// A fallback dividing quotas among no instance.
    #[error(
        "a fallback divides quotas among at least 1 instance, not 0: give the number of instances"
    )]
    FallbackInstances,
    /// A fallback with a zero timeout.
    #[error("a fallback's timeout is zero: every Redis call would fall back; use e.g. 50ms")]
    FallbackTimeout,
    /// A fallback whose breaker opens after no failure.
    #[error("a fallback's breaker needs at least 1 failure to open")]
    FallbackFailures,
    /// A region name that is empty, too long or holds other characters than `A-Z a-z 0-9 . _ -`.
    #[error(
        "invalid region name {name:?}: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
    )]
    InvalidRegionName {
        /// The name refused.
        name: String,
    },
    /// An emergency share outside (0, 1].
    #[error(
        "a region's emergency fraction must be in (0, 1], not {fraction}: use `refuse` to spend \
         nothing past the allotments held"
    )]
    EmergencyFraction {
        /// The fraction refused.
        fraction: f64,
    },
    /// A region store whose `sync_every` or `move_timeout` is zero.
    #[error(
        "a region store's sync_every and move_timeout must be above zero, e.g. 100ms and 500ms"
    )]
    ZeroRegionInterval,
    /// A fallback with a zero cool-down.
    #[error("a fallback's cool-down is zero: Redis would be called again at once; use e.g. 1s")]
    FallbackCoolDown,
}

/// What the URLs of a setting point at, in messages.
fn role(setting: &str) -> &'static str {
    match setting {
        "nodes" => "Redis Cluster node",
        "sentinels" => "Redis Sentinel",
        _ => "Redis",
    }
}
