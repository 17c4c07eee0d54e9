//! Where the shares of every bucket are kept: [`Shares`], in process for one `serve`
//! instance ([`InProcessShares`]), in Redis for several.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tower_redis_ratelimit::RedisStore;
use tower_redis_ratelimit::store::StoreError;

use super::share::{Entry, Timing, leave, settle};

/// The shares of every bucket: each call one atomic step of [`super::share`]'s transition,
/// timed by the store's own clock.
#[tonic::async_trait]
pub trait Shares: Send + Sync + 'static {
    /// Settles `holder`'s share of `bucket` (`limit` tokens per period), reporting its
    /// `demand` (requests per period); the share its assignment carries from now on.
    async fn settle(
        &self,
        bucket: &str,
        holder: &str,
        demand: u64,
        limit: u64,
        timing: Timing,
    ) -> Result<u64, StoreError>;

    /// `holder` is gone from `bucket`: its share is freed once its assignment has expired.
    async fn leave(&self, bucket: &str, holder: &str, timing: Timing) -> Result<(), StoreError>;
}

/// The shares in this process: enough when one `serve` instance serves every Envoy.
pub struct InProcessShares {
    started: Instant,
    buckets: Mutex<HashMap<String, HashMap<String, Entry>>>,
}

impl InProcessShares {
    /// No bucket shared yet.
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Milliseconds since the store was made: 0 means "never" in an entry, so the clock
    /// starts at 1.
    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX) + 1
    }

    fn with_bucket<T>(
        &self,
        bucket: &str,
        act: impl FnOnce(&mut HashMap<String, Entry>) -> T,
    ) -> T {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let entries = buckets.entry(bucket.to_owned()).or_default();
        let answer = act(entries);
        if entries.is_empty() {
            buckets.remove(bucket);
        }
        answer
    }

    /// Forgets the buckets whose entries have all expired (those no Envoy reports any more).
    pub fn sweep(&self) {
        let now = self.now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        buckets.retain(|_, entries| {
            entries.retain(|_, entry| entry.expires > now);
            !entries.is_empty()
        });
    }
}

impl Default for InProcessShares {
    fn default() -> Self {
        Self::new()
    }
}

#[tonic::async_trait]
impl Shares for InProcessShares {
    async fn settle(
        &self,
        bucket: &str,
        holder: &str,
        demand: u64,
        limit: u64,
        timing: Timing,
    ) -> Result<u64, StoreError> {
        let now = self.now();
        Ok(self.with_bucket(bucket, |entries| {
            settle(entries, holder, demand, limit, now, timing)
        }))
    }

    async fn leave(&self, bucket: &str, holder: &str, timing: Timing) -> Result<(), StoreError> {
        let now = self.now();
        self.with_bucket(bucket, |entries| leave(entries, holder, now, timing));
        Ok(())
    }
}

/// How long a stream waits for Redis before it keeps the assignment in force (which then
/// expires at Envoy unless a later call succeeds): a Redis that hangs must not stop a
/// stream from reading its reports.
pub const REDIS_DEADLINE: Duration = Duration::from_millis(250);

/// The shares in a Redis store (`lua/shares.lua`): for several `serve` instances, whose
/// Envoys then share each bucket's quota. A bucket is one key, whose hash tag is a digest of
/// the bucket's name. Each call waits at most [`REDIS_DEADLINE`].
pub struct RedisShares {
    store: RedisStore,
}

impl RedisShares {
    /// The shares in `store`.
    pub fn new(store: RedisStore) -> Self {
        Self { store }
    }
}

/// `call`'s answer, or a timeout after [`REDIS_DEADLINE`].
async fn within<T>(call: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    tokio::time::timeout(REDIS_DEADLINE, call)
        .await
        .unwrap_or(Err(StoreError::timeout(REDIS_DEADLINE)))
}

/// A bucket's name as its key's hash tag: the first 16 bytes of its SHA-256, in hex (no `{`
/// or `}`, and short whatever the bucket id's length).
pub(super) fn digest(bucket: &str) -> String {
    crate::hex::lower(&Sha256::digest(bucket.as_bytes())[..16])
}

#[tonic::async_trait]
impl Shares for RedisShares {
    async fn settle(
        &self,
        bucket: &str,
        holder: &str,
        demand: u64,
        limit: u64,
        timing: Timing,
    ) -> Result<u64, StoreError> {
        within(
            self.store
                .settle_share(&digest(bucket), holder, demand, limit, timing),
        )
        .await
    }

    async fn leave(&self, bucket: &str, holder: &str, timing: Timing) -> Result<(), StoreError> {
        self.store
            .leave_share(&digest(bucket), holder, timing)
            .await
    }
}
