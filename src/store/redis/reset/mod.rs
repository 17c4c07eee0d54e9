//! Resets: a client's state deleted in Redis, and every instance told to forget what it
//! remembers of it.
//!
//! Deleting a client's keys by hand does not lift a ban: every instance keeps answering from
//! what it remembers (a denial until its wait ends, a quota lease until it is spent). So a reset
//! (`RedisStore::reset`) is one script call (`lua/reset.lua`) that deletes the state of a
//! policy's rules for one client and, in the same atomic step, publishes the fact on the
//! channel `<prefix>:reset`. Every store with something to forget (a denial cache, quota
//! leases) listens there ([`listener`]) and forgets what the reset covers.
//!
//! What keeps that exact:
//! - **Order.** The message leaves Redis after the keys are gone, so an instance that hears it
//!   and asks Redis again meets the fresh state. An answer to a call asked before the instance
//!   heard it may predate the reset: the denial cache and the leases have an epoch that each
//!   reset moves on, and keep nothing from a call of an earlier epoch (a grant's units go back).
//! - **Topologies.** A PUBLISH reaches every node of a Redis Cluster over its bus, and every
//!   replica: the listener subscribes on any one node (the first of the configured ones that
//!   answers), on the standalone server, or on the primary the sentinels name.
//! - **Gaps.** A message published while an instance was not subscribed (not yet, or its
//!   subscription broke: a restart, a failover, a partition) is lost to it. So each time the
//!   listener subscribes, the store forgets everything it remembered (every denial; every lease,
//!   given back): what it learns afterwards is newer than any reset it missed. A listener that
//!   hears no PING answer within `stale_after` subscribes again.
//! - **Start.** A store's calls wait for its listener's first subscription to be tried (at
//!   most `stale_after`, within their deadline) before they are asked, so at start there is
//!   no gap: what they teach is kept, and the first subscription forgets nothing but what a
//!   call that gave up waiting taught. Only a subscription made again after a lost connection
//!   forgets what was remembered.
//!
//! The fallback's local counts are reset in the instance that resets, not in the others: they
//! are used only while Redis fails, when a reset cannot be made anyway.

mod listener;
mod message;

use std::sync::Arc;

pub(super) use self::listener::Listener;
use self::message::Reset;
use super::Inner;
use super::local::leases;
use super::script::decide::StateKey;
use super::script::{Call, Entry};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::StoreError;
use crate::store::redis::key::StorageKey;

/// The channel the stores of key prefix `prefix` hear resets on.
pub(super) fn channel(prefix: &str) -> String {
    format!("{prefix}:reset")
}

/// Resets `key` under `policy` (see `RedisStore::reset`).
pub(super) async fn reset(inner: Arc<Inner>, key: Key, policy: Policy) -> Result<(), StoreError> {
    Listener::ensure(&inner);
    let client = StorageKey::new(&key);
    let states = inner.names.of(&policy);
    let reset = Reset::new(client.as_str(), &states);
    let mut call = Call::new(Entry::Reset, 0, states.len());
    for state in states.iter() {
        call.key(StateKey {
            prefix: &inner.prefix,
            state,
            client: client.as_str(),
        });
    }
    call.arg(channel(&inner.prefix)).arg(reset.encode());
    let deleted = inner.connection.call::<i64>(&call).await;
    // Whatever the outcome (a call that timed out may have been applied), this instance forgets;
    // its own listener hears the message too, when it was published.
    forget(&inner, &reset);
    if let Some(fallback) = &inner.fallback {
        fallback.reset(&key, &policy);
    }
    deleted.map(drop)
}

/// Forgets what `reset` covers: remembered denials, and quota leases (dropped: their units were
/// taken from the state the reset deleted).
fn forget(inner: &Inner, reset: &Reset) {
    if let Some(denials) = &inner.denials {
        denials.forget(|key, policy| reset.covers(key, &inner.names.of(policy)));
    }
    if let Some(leases) = &inner.leases {
        leases.forget(|key, policy| reset.covers(key, &inner.names.of(policy)));
    }
}

/// Forgets everything this store remembers, which may predate a reset it did not hear of.
fn forget_everything(inner: &Arc<Inner>) {
    if let Some(denials) = &inner.denials {
        denials.forget(|_, _| true);
    }
    leases::forget_all(inner);
}
