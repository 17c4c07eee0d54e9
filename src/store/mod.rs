//! Where limits are counted: the [`Store`] trait and its implementations.
//!
//! - [`MemoryStore`]: in process, the embedded default. Exact, fast, one process only.
//! - [`RedisStore`]: shared by every replica through Redis; every decision is one atomic Lua call.
//!
//! Both also lease concurrency permits ([`Store::acquire`], [`Store::release`], [`Store::renew`]):
//! see [`concurrency`](crate::concurrency).
//!
//! A store answers with a [`StoreFuture`], which is either already resolved (the memory store:
//! no allocation, no timer) or a boxed future (the Redis store). The layer bounds the wait with its
//! deadline and turns errors into its failure mode.

mod key;
mod memory;
mod redis;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub use self::memory::{MemoryStore, MemoryStoreBuilder};
pub use self::redis::{RedisStore, RedisStoreBuilder};

use crate::concurrency::{Acquired, Lease, PermitId, Renewal, Slot};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;

/// Keeps the state of rate limits and decides whether a request may pass.
///
/// Implementations must be atomic per key: two concurrent checks of one key never both consume
/// the last unit of a quota. They must be cheap to share: the layer keeps one behind an `Arc`.
pub trait Store: Send + Sync + 'static {
    /// Checks (and, when admitted, counts) a request of `cost` units against every rule of
    /// `policy` for `key`, all or nothing. A `cost` of zero reports without counting.
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision>;

    /// Takes a slot: admits `permit` only while fewer than `limit` live permits hold `slot`,
    /// atomically, dropping expired leases first. An admitted permit's lease runs for
    /// `lease.duration()`, and the store renews it every `lease.renew_every()` (its heartbeat)
    /// until [`release`](Self::release) is called. A refusal writes nothing.
    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        lease: Lease,
    ) -> StoreFuture<Acquired>;

    /// Gives a slot back and stops renewing it; answers whether the lease was still live.
    /// Releasing an unknown or expired permit is harmless. The heartbeat stops renewing the permit
    /// when this is called, even if the returned future never runs.
    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool>;

    /// Extends the lease of every live permit in `renewals` to now plus its lease, in as few
    /// round trips as the store can, and answers the permits that were gone (released or
    /// expired). A gone permit is never revived: its slot may already be someone else's.
    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>>;
}

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        (**self).check(key, policy, cost)
    }

    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        lease: Lease,
    ) -> StoreFuture<Acquired> {
        (**self).acquire(slot, permit, limit, lease)
    }

    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool> {
        (**self).release(slot, permit)
    }

    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        (**self).renew(renewals)
    }
}

/// A lease in whole microseconds, as the stores count time; never zero.
pub(crate) fn lease_micros(lease: Duration) -> u64 {
    crate::clock::micros(lease).max(1)
}

/// The answer of a [`Store`]: resolved at once, or pending on I/O.
#[must_use = "futures do nothing unless polled"]
pub struct StoreFuture<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Ready(Option<Result<T, StoreError>>),
    Pending(Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>),
}

impl<T> StoreFuture<T> {
    /// An answer that is already known (a synchronous store).
    pub fn ready(result: Result<T, StoreError>) -> Self {
        Self {
            inner: Inner::Ready(Some(result)),
        }
    }

    /// An answer that needs I/O.
    pub fn new(future: impl Future<Output = Result<T, StoreError>> + Send + 'static) -> Self {
        Self {
            inner: Inner::Pending(Box::pin(future)),
        }
    }

    /// Takes the answer if it is already known, so callers can skip the asynchronous path; `None`
    /// when it needs polling (or was already taken).
    pub fn take_ready(&mut self) -> Option<Result<T, StoreError>> {
        match &mut self.inner {
            Inner::Ready(result) => result.take(),
            Inner::Pending(_) => None,
        }
    }
}

// The answer is never pinned (only the boxed future is), so the wrapper can move freely.
impl<T> Unpin for StoreFuture<T> {}

impl<T> Future for StoreFuture<T> {
    type Output = Result<T, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().inner {
            Inner::Ready(result) => {
                Poll::Ready(result.take().expect("StoreFuture polled after completion"))
            }
            Inner::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for StoreFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.inner {
            Inner::Ready(_) => "ready",
            Inner::Pending(_) => "pending",
        };
        f.debug_tuple("StoreFuture").field(&state).finish()
    }
}
