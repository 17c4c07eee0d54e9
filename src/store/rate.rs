//! [`Store`]: where rate limits are counted.

use super::StoreFuture;
use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;

/// Keeps the state of rate limits and decides whether a request may pass.
///
/// Implementations must be atomic per key: two concurrent checks of one key never both consume
/// the last unit of a quota. They must be cheap to share: a layer keeps one behind an `Arc`.
/// [`MemoryStore`](super::MemoryStore) and `RedisStore` implement it; so may your own store, which
/// computes one [`RuleVerdict`](crate::decision::RuleVerdict) per rule and combines them with
/// [`Decision::from_verdicts`].
pub trait Store: Send + Sync + 'static {
    /// Checks (and, when admitted, counts) a request of `cost` units against every rule of
    /// `policy` for `key`, all or nothing. A `cost` of zero reports without counting.
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision>;
}

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        (**self).check(key, policy, cost)
    }
}
