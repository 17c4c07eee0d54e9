//! The memory store's concurrency permits: per slot, the permits held and when they expire.
//!
//! The same semantics as `lua/concurrency.lua`, against the store's clock: a slot admits while
//! fewer than `limit` permits are live, expired permits are dropped on every write, a renewal never
//! revives a permit whose TTL ended. Memory is bounded: a slot holds at most `limit` live permits, a slot
//! with none left is removed at once, and the number of slots is capped by `max_keys`.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;
use smallvec::SmallVec;

use super::key::bounded;
use super::{Inner, MemoryStore, Padded};
use crate::clock::micros;
use crate::store::permits::heartbeat::{Heartbeat, Renews};
use crate::store::permits::{
    Acquired, PermitId, PermitStore, PermitTtl, Renewal, Slot, ttl_micros,
};
use crate::store::{StoreError, StoreErrorKind, StoreFuture};
use crate::sync::lock;

/// The permits of a store: its tables, sharded like its keys, and their heartbeat.
pub(super) struct Permits {
    tables: Box<[Padded<Mutex<Table>>]>,
    heartbeat: Heartbeat,
}

impl Permits {
    /// `shards` tables, the table at `index` holding at most `cap(index)` slots.
    pub(super) fn new(shards: usize, cap: impl Fn(usize) -> usize) -> Self {
        Self {
            tables: (0..shards)
                .map(|index| Padded(Mutex::new(Table::new(cap(index)))))
                .collect(),
            heartbeat: Heartbeat::new(),
        }
    }
}

/// The slots of one shard.
pub(super) struct Table {
    slots: HashTable<SlotPermits>,
    capacity: usize,
}

struct SlotPermits {
    hash: u64,
    key: Box<[u8]>,
    /// Permit ids and the moment (µs) they expire.
    permits: SmallVec<[(PermitId, u64); 4]>,
}

impl SlotPermits {
    fn drop_expired(&mut self, now: u64) {
        self.permits.retain(|(_, expires_at)| *expires_at > now);
    }
}

impl Table {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            slots: HashTable::new(),
            capacity,
        }
    }

    fn find(&mut self, hash: u64, key: &[u8]) -> Option<&mut SlotPermits> {
        self.slots.find_mut(hash, |slot| *slot.key == *key)
    }

    fn acquire(
        &mut self,
        hash: u64,
        key: &[u8],
        permit: PermitId,
        limit: u32,
        expires_at: u64,
        now: u64,
    ) -> Result<Acquired, StoreError> {
        if let Some(slot) = self.find(hash, key) {
            let live = slot.permits.iter().filter(|(_, end)| *end > now).count() as u64;
            // A refusal writes nothing, as in the script.
            if live >= u64::from(limit) {
                return Ok(Acquired::new(false, live));
            }
            slot.drop_expired(now);
            slot.permits.retain(|(id, _)| *id != permit);
            slot.permits.push((permit, expires_at));
            return Ok(Acquired::new(true, slot.permits.len() as u64));
        }
        if self.slots.len() >= self.capacity {
            self.evict_expired(now);
            if self.slots.len() >= self.capacity {
                // Forgetting a slot with live permits would admit more than its limit.
                return Err(StoreError::new(
                    StoreErrorKind::ErrorReply,
                    std::io::Error::other(
                        "the memory store holds as many concurrency slots as `max_keys` allows, all in use",
                    ),
                ));
            }
        }
        let mut permits = SmallVec::new();
        permits.push((permit, expires_at));
        self.slots.insert_unique(
            hash,
            SlotPermits {
                hash,
                key: key.into(),
                permits,
            },
            |slot| slot.hash,
        );
        Ok(Acquired::new(true, 1))
    }

    fn release(&mut self, hash: u64, key: &[u8], permit: PermitId, now: u64) -> bool {
        let Ok(mut entry) = self.slots.find_entry(hash, |slot| *slot.key == *key) else {
            return false;
        };
        let slot = entry.get_mut();
        let live = slot
            .permits
            .iter()
            .any(|(id, end)| *id == permit && *end > now);
        slot.permits.retain(|(id, _)| *id != permit);
        slot.drop_expired(now);
        if slot.permits.is_empty() {
            entry.remove();
        }
        live
    }

    fn renew(
        &mut self,
        hash: u64,
        key: &[u8],
        permit: PermitId,
        expires_at: u64,
        now: u64,
    ) -> bool {
        let Some(slot) = self.find(hash, key) else {
            return false;
        };
        match slot
            .permits
            .iter_mut()
            .find(|(id, end)| *id == permit && *end > now)
        {
            Some((_, end)) => {
                *end = (*end).max(expires_at);
                true
            }
            None => false,
        }
    }

    fn live(&mut self, hash: u64, key: &[u8], now: u64) -> u64 {
        self.find(hash, key).map_or(0, |slot| {
            slot.permits.iter().filter(|(_, end)| *end > now).count() as u64
        })
    }

    /// Drops every expired permit and every slot left empty.
    pub(super) fn evict_expired(&mut self, now: u64) -> usize {
        let before = self.slots.len();
        self.slots.retain(|slot| {
            slot.drop_expired(now);
            !slot.permits.is_empty()
        });
        before - self.slots.len()
    }
}

/// A slot's key in the table: the limit name, `:`, and the bounded client key. Names never hold
/// a `:`, so the first one separates the two unambiguously, and after it a verbatim key (at most
/// 64 bytes) never equals a digest (65). At most 64 + 1 + 65 bytes: built on the stack.
fn table_key(slot: &Slot) -> SmallVec<[u8; 136]> {
    let mut key = SmallVec::new();
    key.extend_from_slice(slot.name().as_bytes());
    key.push(b':');
    key.extend_from_slice(&bounded(slot.key()));
    key
}

impl Inner {
    fn permit_table(&self, key: &[u8]) -> (u64, MutexGuard<'_, Table>) {
        let hash = self.hasher.hash_one(key);
        let tables = &self.permits.tables;
        let table = &tables[(hash >> 32) as usize & (tables.len() - 1)].0;
        (hash, lock(table))
    }

    fn acquire(
        self: &Arc<Self>,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        ttl: PermitTtl,
    ) -> Result<Acquired, StoreError> {
        let now = self.clock.now_micros();
        let key = table_key(slot);
        let (hash, mut table) = self.permit_table(&key);
        let expires_at = now.saturating_add(ttl_micros(ttl.duration()));
        let acquired = table.acquire(hash, &key, permit, limit, expires_at, now)?;
        drop(table);
        if acquired.is_admitted() {
            Heartbeat::hold(self, slot.clone(), permit, ttl);
        }
        Ok(acquired)
    }

    fn release(&self, slot: &Slot, permit: PermitId) -> bool {
        self.permits.heartbeat.forget(permit);
        let now = self.clock.now_micros();
        let key = table_key(slot);
        let (hash, mut table) = self.permit_table(&key);
        table.release(hash, &key, permit, now)
    }

    pub(super) fn evict_expired_permits(&self) -> usize {
        let now = self.clock.now_micros();
        self.permits
            .tables
            .iter()
            .map(|table| lock(&table.0).evict_expired(now))
            .sum()
    }
}

impl Renews for Inner {
    fn heartbeat(&self) -> &Heartbeat {
        &self.permits.heartbeat
    }

    fn renew(self: &Arc<Self>, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        let now = self.clock.now_micros();
        let gone = renewals
            .iter()
            .filter(|renewal| {
                let key = table_key(&renewal.slot);
                let (hash, mut table) = self.permit_table(&key);
                let expires_at = now.saturating_add(micros(renewal.ttl).max(1));
                !table.renew(hash, &key, renewal.permit, expires_at, now)
            })
            .map(|renewal| renewal.permit)
            .collect::<Vec<_>>();
        self.permits.heartbeat.forget_gone(&gone);
        StoreFuture::ready(Ok(gone))
    }
}

impl PermitStore for MemoryStore {
    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        ttl: PermitTtl,
    ) -> StoreFuture<Acquired> {
        self.ensure_janitor();
        StoreFuture::ready(self.inner.acquire(slot, permit, limit, ttl))
    }

    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool> {
        StoreFuture::ready(Ok(self.inner.release(slot, permit)))
    }

    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        Renews::renew(&self.inner, renewals)
    }
}

impl MemoryStore {
    /// How many permits of `slot` are live (held, TTL not expired).
    pub fn in_flight(&self, slot: &Slot) -> u64 {
        let now = self.inner.clock.now_micros();
        let key = table_key(slot);
        let (hash, mut table) = self.inner.permit_table(&key);
        table.live(hash, &key, now)
    }

    /// How many permits this store's heartbeat is renewing (held by this process, not released).
    pub fn renewing(&self) -> usize {
        self.inner.permits.heartbeat.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_admits_up_to_its_limit_and_expired_permits_make_room() {
        let mut table = Table::new(10);
        let (a, b, c) = (PermitId::next(), PermitId::next(), PermitId::next());
        // Slot `k` with a limit of 2: `permit` asks at `now` for a TTL ending at `expires_at`.
        let mut acquire =
            |permit, expires_at, now| table.acquire(1, b"k", permit, 2, expires_at, now).unwrap();
        assert_eq!(acquire(a, 100, 0), Acquired::new(true, 1));
        assert_eq!(acquire(b, 200, 0), Acquired::new(true, 2));
        assert_eq!(acquire(c, 300, 50), Acquired::new(false, 2));
        // At 100, a's TTL has ended: c takes its place.
        assert_eq!(acquire(c, 300, 100), Acquired::new(true, 2));
        assert!(!table.release(1, b"k", a, 100), "a had expired");
        assert!(table.release(1, b"k", b, 150));
        assert!(table.release(1, b"k", c, 150));
        assert_eq!(table.slots.len(), 0, "an empty slot is removed at once");
    }

    #[test]
    fn renewals_extend_live_permits_and_never_revive_ended_ones() {
        let mut table = Table::new(10);
        let (a, b) = (PermitId::next(), PermitId::next());
        table.acquire(1, b"k", a, 2, 100, 0).unwrap();
        table.acquire(1, b"k", b, 2, 100, 0).unwrap();
        assert!(table.renew(1, b"k", a, 190, 90));
        assert!(!table.renew(1, b"k", b, 200, 100));
        assert_eq!(table.live(1, b"k", 150), 1);
        assert!(!table.renew(1, b"k", PermitId::next(), 200, 100));
    }

    #[test]
    fn a_full_table_frees_expired_slots_and_never_forgets_live_ones() {
        let mut table = Table::new(1);
        table.acquire(1, b"a", PermitId::next(), 1, 100, 0).unwrap();
        assert!(
            table
                .acquire(2, b"b", PermitId::next(), 1, 100, 50)
                .is_err()
        );
        assert!(
            table
                .acquire(2, b"b", PermitId::next(), 1, 300, 100)
                .unwrap()
                .is_admitted()
        );
        assert_eq!(table.slots.len(), 1);
    }
}
