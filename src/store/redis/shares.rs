//! The shares of a quota service's buckets in Redis (`lua/shares.lua`): what several
//! instances of the gateway's Envoy quota service (`ratelimit-gateway serve`) keep together,
//! so that the Envoys connected to all of them share each bucket's quota. The gateway holds
//! the same transition in Rust for one instance, and the guide (`gateway/docs/envoy.md`) its
//! bound.

use super::RedisStore;
use super::script::{Call, Entry};
use crate::store::StoreError;

/// The times that bound a quota service's assignments, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareTiming {
    /// How long Envoy applies an assignment that is not renewed.
    pub ttl_ms: u64,
    /// What is added to it for an assignment's way to Envoy: a lowered share stays reserved
    /// until `ttl_ms + grace_ms` after the higher one was last sent.
    pub grace_ms: u64,
    /// The shortest time between two changes of one holder's share.
    pub min_change_ms: u64,
}

impl RedisStore {
    /// Settles `holder`'s share of `bucket` (`limit` tokens per period, below 2^32), with its
    /// `demand` (requests per period, below 2^20), in one atomic step timed by the server's
    /// clock; the share its next assignment carries. `bucket` names the bucket among every
    /// other, without `{` or `}` (a digest): it is the hash tag of the bucket's one key, so
    /// that a cluster keeps each bucket in one slot.
    pub async fn settle_share(
        &self,
        bucket: &str,
        holder: &str,
        demand: u64,
        limit: u64,
        timing: ShareTiming,
    ) -> Result<u64, StoreError> {
        let mut call = self.share_call(bucket, "settle", holder, timing);
        call.arg(demand).arg(limit);
        self.inner.connection.call(&call).await
    }

    /// `holder` is gone from `bucket`: its share is freed once its last assignment has
    /// expired.
    pub async fn leave_share(
        &self,
        bucket: &str,
        holder: &str,
        timing: ShareTiming,
    ) -> Result<(), StoreError> {
        let call = self.share_call(bucket, "leave", holder, timing);
        let _zero: u64 = self.inner.connection.call(&call).await?;
        Ok(())
    }

    fn share_call(&self, bucket: &str, op: &str, holder: &str, timing: ShareTiming) -> Call {
        let mut call = Call::new(Entry::Shares, 0, 1);
        call.key(format!("{}:shares:{{{bucket}}}", self.inner.prefix))
            .arg(op)
            .arg(holder)
            .arg(timing.ttl_ms)
            .arg(timing.grace_ms)
            .arg(timing.min_change_ms);
        call
    }
}
