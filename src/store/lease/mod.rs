//! Concurrency leases: what a store keeps for [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer)
//! and the fleet shedder, and the [`LeaseStore`] trait that keeps it.
//!
//! A request takes a *permit* from a [`Slot`] (a limit name and a client key). Permits are
//! *leases*: the store forgets one that is not renewed within its [`Lease`], and one background
//! task per store (the heartbeat) renews every live permit of the process, so a crashed or
//! partitioned server's slots come back within a lease while long requests keep theirs.

pub(crate) mod heartbeat;
mod permit_id;
mod slot;

use std::time::Duration;

pub use self::permit_id::PermitId;
pub use self::slot::{Acquired, Lease, MAX_LEASE, MIN_LEASE, Renewal, Slot};
use super::StoreFuture;

/// Leases concurrency permits: at most a limit of live permits per slot, across every server
/// sharing the store. [`MemoryStore`](super::MemoryStore) and `RedisStore` implement it.
pub trait LeaseStore: Send + Sync + 'static {
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

impl<S: LeaseStore + ?Sized> LeaseStore for std::sync::Arc<S> {
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
