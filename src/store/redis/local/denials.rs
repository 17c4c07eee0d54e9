//! [`Denials`]: "denied until T", learned from a store, answered in process until T.
//!
//! A rate rule's capacity comes back only with time: once a store has denied a request of a key
//! until T, every request like it is denied until T, whatever any other instance does meanwhile
//! (others can only use capacity up, never give it back). So a denial can be answered locally,
//! with no network, until its wait is over, and it is never wrong: abusive traffic, which is
//! denied traffic, costs the store nothing but one call per retry period.
//!
//! What is remembered, and for which requests, keeps the local answer the store's own:
//! - requests of cost 1 only: a denial of a cost-5 request says nothing about a cost-1 request,
//!   and a cost-5 request denied until T would report counts (what remains, what is used) that
//!   move while it waits; a denied cost-1 request finds its rule full, and a full rule's counts
//!   do not move until its wait is over (a rule holding more than its capacity, after a quota
//!   was lowered under the same name, drains while it denies: such a denial is not remembered);
//! - per client key and policy, the whole policy's decision: its most restrictive rule, and the
//!   longest wait, which is the whole policy's; and each refusing rule's own wait, so that a
//!   refusal answered later names the rules that still refuse it, as the store would;
//! - the local answer is the stored decision aged by the time since: the waits shorter by that
//!   much, the counts the same. The wait counts from when the store was asked, not from when it
//!   answered, so the local denial ends no later than the store's would.
//!
//! It assumes the store's state only moves forward: a key deleted in Redis by hand, a store
//! flushed, a rule's quota raised under the same name are not seen until the wait is over. A
//! reset (`RedisStore::reset`) is the way to move it back: every instance hears of it and
//! [forgets](Denials::forget) the denials it covers; answers to calls asked before it are not
//! learned (the table's epoch moved on), since Redis may have decided them before the reset.
//!
//! Memory is bounded: at most a configured number of denials, sharded; a full shard forgets the
//! denial that ends soonest (a heap orders them), and ended denials go as they are met.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use hashbrown::HashTable;

use crate::decision::{Decision, Outcome};
use crate::key::Key;
use crate::policy::Policy;
use crate::sync::lock;

/// How many shards a table of denials is split into (each its own lock), at most.
const SHARDS: usize = 16;

/// The denials a store has answered, remembered until they end.
pub(crate) struct Denials {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    /// Moves on with every reset: an answer to a call asked in an earlier epoch is not learned.
    epoch: AtomicU64,
}

struct Shard {
    table: HashTable<Denial>,
    /// When each remembered denial ends, soonest first, with its entry's sequence number: an
    /// entry replaced or removed leaves a stale item, skipped when met.
    ends: BinaryHeap<Reverse<(u64, u64, u64)>>,
    capacity: usize,
    next_seq: u64,
}

struct Denial {
    hash: u64,
    seq: u64,
    key: Key,
    policy: Policy,
    /// When the store was asked (µs, the caller's clock).
    at: u64,
    /// When the denial ends: `at` plus its wait.
    until: u64,
    decision: Decision,
    /// Each rule's wait (µs, by rule index; 0 for a rule that admitted) when more than one rule
    /// refused; empty otherwise, when the reported rule is the only one.
    waits: Box<[u64]>,
}

impl Denials {
    /// A table of at most `max` denials (at least one per shard).
    pub(crate) fn new(max: usize) -> Self {
        let shards = SHARDS.min(max.max(1));
        let (per_shard, extra) = (max / shards, max % shards);
        Self {
            shards: (0..shards)
                .map(|index| {
                    Mutex::new(Shard {
                        table: HashTable::new(),
                        ends: BinaryHeap::new(),
                        capacity: (per_shard + usize::from(index < extra)).max(1),
                        next_seq: 0,
                    })
                })
                .collect(),
            hasher: foldhash::fast::RandomState::default(),
            epoch: AtomicU64::new(0),
        }
    }

    /// The current epoch, to give [`learn`](Self::learn) the answer to a call asked now.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Forgets every denial of a key and policy that `covered` names (a reset of their state),
    /// and moves the epoch on, so that no answer to a call asked before is learned later.
    pub(crate) fn forget(&self, covered: impl Fn(&Key, &Policy) -> bool) {
        // Before the shards are locked: a `learn` that takes a shard's lock after this pass has
        // released it sees the new epoch (the lock orders the two); one that took it before has
        // inserted what this pass then removes.
        self.epoch.fetch_add(1, Ordering::Relaxed);
        for shard in self.shards.iter() {
            lock(shard)
                .table
                .retain(|denial| !covered(&denial.key, &denial.policy));
        }
    }

    /// The store's decision on a request of `key` under `policy` costing `cost`, asked at `now`
    /// (µs), if a remembered denial answers it.
    pub(crate) fn answer(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
        now: u64,
    ) -> Option<Decision> {
        if cost != 1 {
            return None;
        }
        let hash = self.hash(key, policy);
        let mut shard = self.shard(hash);
        let found = shard
            .table
            .find_entry(hash, |denial| denial.is(key, policy))
            .ok()?;
        if now >= found.get().until {
            found.remove();
            return None;
        }
        let denial = found.get();
        // A clock that went back (a test's, or a caller's own) is not counted down from: the
        // store's answer then depends on where its state's time stands, which a denial does not
        // hold. Ask the store.
        if now < denial.at {
            return None;
        }
        let elapsed = now - denial.at;
        let decision = denial.decision.aged(elapsed);
        if denial.waits.is_empty() {
            return Some(decision);
        }
        // The rules whose own wait is not over refuse still: the reported one (the longest wait)
        // and any other, as the store would name them now.
        let still_refusing = denial
            .waits
            .iter()
            .enumerate()
            .filter(|(_, wait)| **wait > elapsed)
            .fold(0u8, |bits, (index, _)| bits | 1 << index);
        Some(decision.refused_by_rules(still_refusing))
    }

    /// Learns from the store's `decision` on a request of `key` under `policy` costing `cost`,
    /// asked at `asked` (µs, in [`epoch`](Self::epoch) `asked.1`): remembers it if it is a
    /// denial that says how long every such request will be denied, and otherwise forgets any
    /// denial remembered for the key and policy, which the store has just said something newer
    /// about (a clock gone back, a store restarted). Learns nothing once the epoch has moved on.
    /// `waits` gives each rule's wait in µs (by rule index), asked for only when more than one
    /// rule refused.
    pub(crate) fn learn<W: IntoIterator<Item = u64>>(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
        (at, epoch): (u64, u64),
        decision: &Decision,
        waits: impl FnOnce() -> W,
    ) {
        let until = remembered_until(cost, at, decision);
        let hash = self.hash(key, policy);
        let mut shard = self.shard(hash);
        if self.epoch.load(Ordering::Relaxed) != epoch {
            return;
        }
        let found = shard
            .table
            .find_entry(hash, |denial| denial.is(key, policy));
        let Some(until) = until else {
            if let Ok(found) = found {
                found.remove();
            }
            return;
        };
        match found {
            Ok(found) => {
                found.remove();
            }
            Err(_) => shard.make_room(at),
        }
        let seq = shard.next_seq;
        shard.next_seq += 1;
        shard.ends.push(Reverse((until, seq, hash)));
        let denial = Denial {
            hash,
            seq,
            key: key.clone(),
            policy: policy.clone(),
            at,
            until,
            decision: decision.clone(),
            waits: if decision.refused_by().nth(1).is_some() {
                waits().into_iter().collect()
            } else {
                Box::default()
            },
        };
        shard
            .table
            .insert_unique(hash, denial, |denial| denial.hash);
    }

    /// How many denials are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).table.len())
            .sum()
    }

    fn hash(&self, key: &Key, policy: &Policy) -> u64 {
        self.hasher.hash_one((key.as_bytes(), policy.rule_ids()))
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // hashbrown indexes with the low bits and tags with the top ones: pick the shard with
        // bits from the middle.
        lock(&self.shards[(hash >> 32) as usize % self.shards.len()])
    }
}

/// When a denial of a request of `cost`, asked at `at`, ends, if it is one to remember: a denial of
/// cost 1 by a full rule, with a wait.
fn remembered_until(cost: u32, at: u64, decision: &Decision) -> Option<u64> {
    // Only a full rule's counts stand still while its denial lasts: a rule holding more than its
    // capacity (a quota lowered under the same name) drains while it still denies.
    let full = decision.remaining() == 0 && decision.used() == decision.limit();
    if cost != 1 || decision.outcome() != Outcome::Denied || !full {
        return None;
    }
    let until = at.saturating_add(crate::clock::micros(decision.retry_after()?));
    (until > at).then_some(until)
}

impl Denial {
    fn is(&self, key: &Key, policy: &Policy) -> bool {
        self.key == *key && self.policy.same(policy)
    }
}

impl Shard {
    /// Frees a place for one more denial: ended denials go, then, if the shard is still full,
    /// the one that ends soonest.
    fn make_room(&mut self, now: u64) {
        while let Some(&Reverse((until, seq, hash))) = self.ends.peek() {
            let full = self.table.len() >= self.capacity;
            let live = self.table.find_entry(hash, |denial| denial.seq == seq);
            match live {
                // A stale item: its entry was replaced or removed.
                Err(_) => {
                    self.ends.pop();
                }
                Ok(entry) if until <= now || full => {
                    entry.remove();
                    self.ends.pop();
                }
                Ok(_) => break,
            }
        }
        // Stale items pile up where the same keys are denied again and again: drop them once
        // they outnumber the entries.
        if self.ends.len() > 2 * self.capacity {
            let table = &self.table;
            self.ends
                .retain(|&Reverse((_, seq, hash))| table.find(hash, |d| d.seq == seq).is_some());
        }
    }
}

#[cfg(test)]
mod tests;
