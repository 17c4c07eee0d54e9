//! Concurrency permits: what a store keeps for [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer)
//! and the fleet shedder, and the [`PermitStore`] trait that keeps it.
//!
//! A request takes a *permit* from a [`Slot`] (a limit name and a client key). Permits are
//! *permits*: the store forgets one that is not renewed within its [`PermitTtl`], and one background
//! task per store (the heartbeat) renews every live permit of the process, so a crashed or
//! partitioned server's slots come back within a TTL while long requests keep theirs.

pub(crate) mod heartbeat;
mod permit_id;
mod slot;

use std::time::Duration;

pub use self::permit_id::PermitId;
pub use self::slot::{Acquired, MAX_PERMIT_TTL, MIN_PERMIT_TTL, PermitTtl, Renewal, Slot};
use super::StoreFuture;

/// Permits concurrency permits: at most a limit of live permits per slot, across every server
/// sharing the store. [`MemoryStore`](super::MemoryStore) and `RedisStore` implement it.
pub trait PermitStore: Send + Sync + 'static {
    /// Takes a slot: admits `permit` only while fewer than `limit` live permits hold `slot`,
    /// atomically, dropping expired permits first. An admitted permit's TTL runs for
    /// `ttl.duration()`, and the store renews it every `ttl.renew_every()` (its heartbeat)
    /// until [`release`](Self::release) is called. A refusal writes nothing.
    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        ttl: PermitTtl,
    ) -> StoreFuture<Acquired>;

    /// Gives a slot back and stops renewing it; answers whether the TTL was still live.
    /// Releasing an unknown or expired permit is harmless. The heartbeat stops renewing the permit
    /// when this is called, even if the returned future never runs.
    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool>;

    /// Extends the TTL of every live permit in `renewals` to now plus its TTL, in as few
    /// round trips as the store can, and answers the permits that were gone (released or
    /// expired). A gone permit is never revived: its slot may already be someone else's.
    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>>;
}

impl<S: PermitStore + ?Sized> PermitStore for std::sync::Arc<S> {
    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        ttl: PermitTtl,
    ) -> StoreFuture<Acquired> {
        (**self).acquire(slot, permit, limit, ttl)
    }

    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool> {
        (**self).release(slot, permit)
    }

    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        (**self).renew(renewals)
    }
}

/// A TTL in whole microseconds, as the stores count time; never zero.
pub(crate) fn ttl_micros(ttl: Duration) -> u64 {
    crate::clock::micros(ttl).max(1)
}
