//! Where the shares of every bucket are kept: [`Shares`], in process for one `serve`
//! instance ([`InProcessShares`]), in Redis for several.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

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
