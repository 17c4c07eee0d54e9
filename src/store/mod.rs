//! Where limits are counted: the [`Store`] and [`PermitStore`](permits::PermitStore) traits and their
//! implementations.
//!
//! - [`MemoryStore`]: in process, the embedded default. Exact, fast, one process only.
//! - `RedisStore` (feature `redis`, on by default): shared by every replica through Redis; every
//!   decision is one atomic Lua call.
//! - `region::RegionStore` (feature `regions`): a region's Redis store, deciding global policies
//!   from allotments of one worldwide quota (see `region`).
//!
//! The memory and Redis stores also hold concurrency permits (feature `concurrency`): see
//! [`permits`].
//!
//! A store answers with a [`StoreFuture`], which is either already resolved (the memory store:
//! no allocation, no timer) or a boxed future (the Redis store). The layer bounds the wait with
//! its deadline and turns a [`StoreError`] into its failure mode.
//!
//! The traits are declared at their module's top: [`Store`] (rate decisions) here, and
//! [`PermitStore`](permits::PermitStore) (concurrency permits) in [`permits`].

mod error;
mod future;
mod memory;
#[cfg(feature = "concurrency")]
#[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
pub mod permits;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "regions")]
#[cfg_attr(docsrs, doc(cfg(feature = "regions")))]
pub mod region;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use self::error::{StoreError, StoreErrorKind};
pub use self::future::StoreFuture;
pub use self::memory::{MemoryStore, MemoryStoreBuilder};
#[cfg(feature = "sentinel")]
pub use self::redis::RedisAuth;
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use self::redis::RedisTls;
#[cfg(all(feature = "tls", feature = "config"))]
pub(crate) use self::redis::check_tls;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::{
    Fallback, QuotaLeases, RedisStore, RedisStoreBuilder, ShareTiming, redact_url,
};
use crate::decision::{Decision, Verdicts};
use crate::key::Key;
use crate::policy::Policy;

/// Keeps the state of rate limits and decides whether a request may pass.
///
/// Implementations must be atomic per key: two concurrent checks of one key never both consume
/// the last unit of a quota. They must be cheap to share: a layer keeps one behind an `Arc`.
/// [`MemoryStore`] and `RedisStore` implement it; so may your own store, which
/// computes one [`RuleVerdict`](crate::decision::RuleVerdict) per rule and combines them with
/// [`Decision::from_verdicts`]. Only [`check`](Self::check) is required.
pub trait Store: Send + Sync + 'static {
    /// Checks (and, when admitted, counts) a request of `cost` units against every rule of
    /// `policy` for `key`, all or nothing. A `cost` of zero reports without counting.
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision>;

    /// [`check`](Self::check), answering with every rule's own verdict beside the decision:
    /// for a caller that reports each rule apart (the gateway's Envoy service, one status per
    /// descriptor). [`MemoryStore`] and `RedisStore` take them from the one step (the one Lua
    /// call) that decides. The default, for a store that keeps only the decision, reads each
    /// other rule after it (a check of cost 0 per rule): one call more per rule, and not
    /// atomic with the decision. Takes the store by `Arc`, as those reads follow the decision.
    fn check_verdicts(
        self: Arc<Self>,
        key: &Key,
        policy: &Policy,
        cost: u32,
    ) -> StoreFuture<Verdicts> {
        let decided = self.check(key, policy, cost);
        let (key, policy) = (key.clone(), policy.clone());
        StoreFuture::new(async move {
            let decision = decided.await?;
            read_verdicts(&*self, &key, &policy, Verdicts::decision_only(decision)).await
        })
    }

    /// Resets `key` under `policy`: forgets what every rule of `policy` has counted for `key`,
    /// so its next request finds the whole quota, as a client never seen before would. For an
    /// operator lifting a ban, or a support desk giving a customer a fresh start.
    ///
    /// A store that answers from state of its own beside the shared one (the Redis store's
    /// denial cache and quota leases, in every instance) forgets that too. The default refuses
    /// ([`StoreErrorKind::ErrorReply`]): a store must say how it
    /// resets.
    fn reset(&self, key: &Key, policy: &Policy) -> StoreFuture<()> {
        let _ = (key, policy);
        StoreFuture::ready(Err(StoreError::error_reply(
            "this store cannot reset a key",
        )))
    }

    /// How long this store waits on its backend before a fallback of its own answers instead
    /// (a Redis store with a [fallback](Fallback): the fallback's timeout); `None`
    /// (the default) when nothing answers in its place. A layer refuses to be built with a
    /// deadline at or below it: the deadline would always answer first, with the layer's
    /// failure mode, and the fallback never.
    fn fallback_timeout(&self) -> Option<Duration> {
        None
    }

    /// Why this store cannot decide now, as far as it knows without a call: a region store
    /// whose ledger is not declared (`store::region`) can grant no quota of a global policy.
    /// `None` (the default) when nothing is known against it. A readiness check says it (the
    /// `config` feature's `Limits::ping_stores`).
    fn unready(&self) -> Option<&'static str> {
        None
    }
}

impl<S: Store + ?Sized> Store for Arc<S> {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        (**self).check(key, policy, cost)
    }

    fn check_verdicts(
        self: Arc<Self>,
        key: &Key,
        policy: &Policy,
        cost: u32,
    ) -> StoreFuture<Verdicts> {
        Arc::clone(&*self).check_verdicts(key, policy, cost)
    }

    fn reset(&self, key: &Key, policy: &Policy) -> StoreFuture<()> {
        (**self).reset(key, policy)
    }

    fn fallback_timeout(&self) -> Option<Duration> {
        (**self).fallback_timeout()
    }

    fn unready(&self) -> Option<&'static str> {
        (**self).unready()
    }
}

/// `answer` with every rule's verdict: those it lacks (an answer that knew only the decision)
/// read from `store` after it, each alone without counting, the reads polled together. The
/// reported rule's verdict is the decision's own.
pub(crate) async fn read_verdicts<S: Store + ?Sized>(
    store: &S,
    key: &Key,
    policy: &Policy,
    answer: Verdicts,
) -> Result<Verdicts, StoreError> {
    if answer.complete(policy) {
        return Ok(answer);
    }
    let decision = answer.into_decision();
    let reported = decision.rule_index();
    let mut rules = Vec::with_capacity(policy.rules().len());
    let mut reads = Vec::new();
    for (index, rule) in policy.rules().iter().enumerate() {
        rules.push(decision.reported_verdict());
        if index != reported {
            let alone = Policy::try_from(rule.clone())
                .map_err(|err| StoreError::error_reply(err.to_string()))?;
            reads.push((index, store.check(key, &alone, 0)));
        }
    }
    // The reads travel together (no combinator crate in every build): each answer lands in its
    // rule's place.
    std::future::poll_fn(|cx| {
        let mut failed = None;
        reads.retain_mut(|(index, read)| match std::pin::Pin::new(read).poll(cx) {
            std::task::Poll::Ready(Ok(own)) => {
                rules[*index] = own.reported_verdict();
                false
            }
            std::task::Poll::Ready(Err(err)) => {
                failed.get_or_insert(err);
                false
            }
            std::task::Poll::Pending => true,
        });
        match failed {
            Some(err) => std::task::Poll::Ready(Err(err)),
            None if reads.is_empty() => std::task::Poll::Ready(Ok(())),
            None => std::task::Poll::Pending,
        }
    })
    .await?;
    Ok(Verdicts::new(decision, rules))
}
