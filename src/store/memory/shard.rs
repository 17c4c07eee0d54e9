//! One shard of the memory store: a hash table of client keys, each with the state of every rule
//! that has counted it, and the bookkeeping that keeps the table bounded.

use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};
use smallvec::SmallVec;

use crate::algorithm::{State, Write};

/// The state of every rule for one client key.
pub(super) struct Entry {
    hash: u64,
    key: StoredKey,
    /// When the last of the rules' states stops mattering (µs since the epoch).
    expires_at: u64,
    rules: SmallVec<[RuleState; 2]>,
    /// Where each rule's state is in `rules`, for a key of many rules (the Envoy service's
    /// domain holds one rule per counter): made past [`INDEX_AT`] rules, so a key of one policy
    /// never pays for it, and a key of thousands is not searched one rule at a time.
    index: Option<Box<HashMap<u64, usize, FixedState>>>,
}

struct RuleState {
    id: u64,
    state: State,
    expires_at: u64,
}

impl Entry {
    /// The live state of rule `id`, if any.
    #[inline]
    pub(super) fn state(&self, id: u64, now: u64) -> Option<&State> {
        self.state_at(self.position(id)?, now)
    }

    /// The live state at `position` (from [`position`](Self::position)), if it is still live.
    #[inline]
    pub(super) fn state_at(&self, position: usize, now: u64) -> Option<&State> {
        let rule = &self.rules[position];
        (rule.expires_at > now).then_some(&rule.state)
    }

    /// Where rule `id`'s state is in the entry, for [`state_at`](Self::state_at) and
    /// [`update`](Self::update): a policy of one rule looks it up once for both.
    #[inline]
    pub(super) fn position(&self, id: u64) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(&id).copied(),
            None => self.rules.iter().position(|rule| rule.id == id),
        }
    }

    /// Makes the index again after rules were dropped (or drops it, for few rules).
    fn reindex(&mut self) {
        self.index = (self.rules.len() > INDEX_AT).then(|| {
            let mut index =
                HashMap::with_capacity_and_hasher(self.rules.len(), FixedState::default());
            for (position, rule) in self.rules.iter().enumerate() {
                index.insert(rule.id, position);
            }
            Box::new(index)
        });
    }

    /// Applies an admitted request's write to rule `id` at `now`, whose state then matters until
    /// `expires_at`. State that no longer mattered is started afresh, never updated.
    #[inline(always)]
    pub(super) fn update(&mut self, id: u64, write: Write, now: u64, expires_at: u64) {
        self.update_at(id, self.position(id), write, now, expires_at);
    }

    /// [`update`](Self::update) for rule `id` found at `position` (`None`: the entry holds no
    /// state for it).
    #[inline(always)]
    pub(super) fn update_at(
        &mut self,
        id: u64,
        position: Option<usize>,
        write: Write,
        now: u64,
        expires_at: u64,
    ) {
        debug_assert_eq!(position, self.position(id));
        let previous = match position {
            Some(position) => {
                let rule = &mut self.rules[position];
                write.apply(&mut rule.state, rule.expires_at > now);
                std::mem::replace(&mut rule.expires_at, expires_at)
            }
            None => {
                // A key whose rules are many and come and go (the Envoy service's domain holds
                // one rule per counter it has seen) would keep every state that expired while
                // the key lived on: before the entry grows past a few rules, those are dropped,
                // so it holds the live states only.
                if self.rules.len() >= PRUNE_AT {
                    let before = self.rules.len();
                    self.rules.retain(|rule| rule.expires_at > now);
                    if self.rules.len() < before {
                        self.reindex();
                    }
                }
                self.rules.push(RuleState {
                    id,
                    state: write.into_state(),
                    expires_at,
                });
                match &mut self.index {
                    Some(index) => {
                        index.insert(id, self.rules.len() - 1);
                    }
                    None if self.rules.len() > INDEX_AT => self.reindex(),
                    None => {}
                }
                0
            }
        };
        // The entry matters as long as its longest-lived rule. Only when the rule that lived
        // longest now expires sooner must the others be looked at.
        if expires_at >= self.expires_at {
            self.expires_at = expires_at;
        } else if previous == self.expires_at {
            self.expires_at = self
                .rules
                .iter()
                .map(|rule| rule.expires_at)
                .max()
                .unwrap_or(expires_at);
        }
    }

    /// Drops the state of every rule in `ids`; whether any rule's state is left.
    fn forget(&mut self, ids: &[u64]) -> bool {
        self.rules.retain(|rule| !ids.contains(&rule.id));
        self.reindex();
        // A lower expiry is only ever a tighter bound: the sweep drops the entry no later.
        self.expires_at = self
            .rules
            .iter()
            .map(|rule| rule.expires_at)
            .max()
            .unwrap_or(0);
        !self.rules.is_empty()
    }

    fn prune(&mut self, now: u64) {
        self.rules.retain(|rule| rule.expires_at > now);
        self.reindex();
    }
}

/// A client key as its entry holds it: inline when short (addresses, UUIDs, most API keys), so
/// a lookup compares it without following a pointer to another cache line (with many keys, that
/// miss was half the cost of a decision); on the heap when longer (at most 65 bytes: longer keys
/// arrive as digests).
enum StoredKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

/// Inline key bytes: with the length and the tag, 40 bytes in the entry, 24 more than the heap
/// form's pointer and length, and no allocation. Client addresses (an IPv6 /64 key is at most 24
/// bytes), UUIDs (36) and most API keys fit.
const INLINE_KEY: usize = 38;

impl StoredKey {
    fn new(key: &[u8]) -> Self {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..key.len()].copy_from_slice(key);
                StoredKey::Inline { len, bytes }
            }
            _ => StoredKey::Heap(key.into()),
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            StoredKey::Heap(bytes) => bytes,
        }
    }
}

/// A shard's table, bounded to `capacity` entries.
pub(super) struct Shard {
    table: HashTable<Entry>,
    capacity: usize,
    /// No entry expires before this (µs): a lower bound, so a full shard of live keys does not
    /// scan itself in vain for every new key (which a flood of new keys would exploit).
    earliest_expiry: u64,
    /// A full shard scans itself for expired entries no earlier than this (µs).
    next_scan: u64,
    /// How many scans a full shard made, for the tests.
    #[cfg(test)]
    scans: usize,
}

/// How many rule states an entry holds before a new one first drops those that expired: above
/// a policy's most rules, so a key under one policy never pays for it.
const PRUNE_AT: usize = crate::policy::MAX_RULES;

/// How many rule states an entry holds before it indexes them by rule (see `Entry::index`).
const INDEX_AT: usize = 16;

/// A full shard scans for expired entries at most once a millisecond, however fast new keys
/// arrive; in between it evicts from a sample, and the background sweep does the bulk.
const MIN_SCAN_GAP_US: u64 = 1_000;

impl Shard {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            table: HashTable::new(),
            capacity,
            earliest_expiry: 0,
            next_scan: 0,
            #[cfg(test)]
            scans: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    pub(super) fn find(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.table.find(hash, |entry| entry.key.as_bytes() == key)
    }

    pub(super) fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        self.table
            .find_mut(hash, |entry| entry.key.as_bytes() == key)
    }

    /// The entry for `key`, created if needed. A full shard first drops expired entries, then the
    /// entry closest to expiry among a sample: the state that matters least is forgotten first.
    pub(super) fn entry(&mut self, hash: u64, key: &[u8], now: u64) -> &mut Entry {
        if self.find(hash, key).is_none() && self.table.len() >= self.capacity {
            if now >= self.earliest_expiry && now >= self.next_scan {
                self.next_scan = now.saturating_add(MIN_SCAN_GAP_US);
                #[cfg(test)]
                {
                    self.scans += 1;
                }
                self.evict_expired(now);
            }
            if self.table.len() >= self.capacity {
                self.evict_one();
            }
        }
        self.table
            .entry(
                hash,
                |entry| entry.key.as_bytes() == key,
                |entry| entry.hash,
            )
            .or_insert_with(|| Entry {
                hash,
                key: StoredKey::new(key),
                expires_at: 0,
                rules: SmallVec::new(),
                index: None,
            })
            .into_mut()
    }

    /// Forgets the state of the rules `ids` for `key` (a reset); the entry goes with its last
    /// rule.
    pub(super) fn forget(&mut self, hash: u64, key: &[u8], ids: &[u64]) {
        if let Ok(mut entry) = self
            .table
            .find_entry(hash, |entry| entry.key.as_bytes() == key)
            && !entry.get_mut().forget(ids)
        {
            entry.remove();
        }
    }

    /// Records that some entry now expires at `at`, keeping the shard's earliest expiry a lower bound.
    pub(super) fn expires(&mut self, at: u64) {
        self.earliest_expiry = self.earliest_expiry.min(at);
    }

    /// Drops every state whose time has passed, then returns the memory of a table that shrank.
    pub(super) fn evict_expired(&mut self, now: u64) -> usize {
        let before = self.table.len();
        let mut earliest = u64::MAX;
        self.table.retain(|entry| {
            if entry.expires_at <= now {
                return false;
            }
            entry.prune(now);
            earliest = earliest.min(entry.expires_at);
            true
        });
        self.earliest_expiry = earliest;
        let len = self.table.len();
        if self.table.capacity() > 64 && self.table.capacity() / 4 > len {
            self.table.shrink_to(len * 2, |entry| entry.hash);
        }
        before - len
    }

    fn evict_one(&mut self) {
        const SAMPLE: usize = 16;
        let victim = self
            .table
            .iter()
            .take(SAMPLE)
            .min_by_key(|entry| entry.expires_at)
            .map(|entry| entry.hash);
        if let Some(hash) = victim
            && let Ok(entry) = self.table.find_entry(hash, |entry| entry.hash == hash)
        {
            entry.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::fixed_window;

    fn state() -> Write {
        Write::Set(State::FixedWindow(fixed_window::State {
            start: 0,
            used: 1,
        }))
    }

    #[test]
    fn a_full_shard_evicts_expired_entries_first_then_the_soonest_to_expire() {
        let mut shard = Shard::new(3);
        for (hash, expires_at) in [(1, 10_000), (2, 50_000), (3, 30_000)] {
            insert(&mut shard, hash, 0, expires_at);
        }
        // At t=20 ms key 1 has expired: it goes, nothing else does.
        insert(&mut shard, 4, 20_000, 100_000);
        assert!(shard.find(1, &1u64.to_le_bytes()).is_none());
        assert_eq!(shard.len(), 3);
        // Nothing expired: the entry closest to expiry (key 3, at 30 ms) goes.
        insert(&mut shard, 5, 25_000, 100_000);
        assert!(shard.find(3, &3u64.to_le_bytes()).is_none());
        assert!(shard.find(2, &2u64.to_le_bytes()).is_some());
        assert_eq!(shard.len(), 3);
    }

    #[test]
    fn an_entry_of_many_rules_keeps_only_the_live_ones() {
        let mut shard = Shard::new(10);
        // A thousand rules of one key, each live for 10 ms, one new every 0.1 ms.
        for id in 0..1_000u64 {
            let now = id * 100;
            shard
                .entry(1, b"domain", now)
                .update(id, state(), now, now + 10_000);
        }
        let entry = shard.find(1, b"domain").unwrap();
        // The rules of the last 10 ms (100 of them), and at most a policy's worth more.
        assert!(
            entry.rules.len() <= 100 + PRUNE_AT,
            "{} rules",
            entry.rules.len()
        );
        assert!(entry.state(999, 99_900).is_some());
        assert!(entry.state(850, 99_900).is_none(), "expired");
        // Many live rules are found through the index, each at its own place.
        assert!(entry.index.is_some());
        for id in 901..1_000 {
            assert!(entry.state(id, 99_900).is_some(), "rule {id}");
        }
        let entry = shard.find_mut(1, b"domain").unwrap();
        entry.forget(&[999]);
        assert!(entry.state(999, 99_900).is_none());
        assert!(entry.state(998, 99_900).is_some());
        entry.prune(200_000);
        assert!(entry.index.is_none() && entry.rules.is_empty());
    }

    fn insert(shard: &mut Shard, hash: u64, now: u64, expires_at: u64) {
        shard
            .entry(hash, &hash.to_le_bytes(), now)
            .update(7, state(), now, expires_at);
        shard.expires(expires_at);
    }

    #[test]
    fn a_full_shard_of_live_keys_does_not_scan_itself_for_every_new_key() {
        let mut shard = Shard::new(100);
        for hash in 0..100 {
            insert(&mut shard, hash, 0, 1_000_000);
        }
        // A flood of new keys while nothing can have expired: one scan at most, which learns the
        // earliest expiry; every other key evicts from a sample.
        for hash in 100..10_000 {
            insert(&mut shard, hash, 5_000 + hash, 1_000_000);
        }
        assert_eq!(shard.len(), 100);
        assert!(shard.scans <= 1, "{} scans", shard.scans);
        // Once the earliest entry has expired, a new key scans again and takes its place.
        insert(&mut shard, 20_000, 1_000_000, 2_000_000);
        assert_eq!(shard.scans, 2);
        assert_eq!(shard.len(), 1);
    }

    #[test]
    fn short_keys_are_held_inline_and_long_ones_on_the_heap() {
        assert_eq!(std::mem::size_of::<StoredKey>(), 40);
        let mut shard = Shard::new(10);
        for key in [
            &b""[..],
            b"203.0.113.5",
            &[7; INLINE_KEY],
            &[8; INLINE_KEY + 1],
            &[9; 65],
        ] {
            shard.entry(key.len() as u64, key, 0);
            let entry = shard.find(key.len() as u64, key).expect("inserted");
            assert_eq!(entry.key.as_bytes(), key);
            let inline = matches!(entry.key, StoredKey::Inline { .. });
            assert_eq!(inline, key.len() <= INLINE_KEY, "{} bytes", key.len());
        }
        // A key is never mistaken for a longer or shorter one sharing its hash.
        shard.entry(1, b"ab", 0);
        assert!(shard.find(1, b"a").is_none());
        assert!(shard.find(1, b"abc").is_none());
    }

    #[test]
    fn an_entry_expires_with_its_longest_lived_rule() {
        let mut shard = Shard::new(10);
        let entry = shard.entry(1, b"k", 0);
        // A rule's state written at `now`, mattering until `rule_expiry`: the entry's expiry.
        for (rule, now, rule_expiry, entry_expiry) in [
            (1, 0, 100, 100),
            (2, 0, 300, 300),
            // A rule that did not live longest expires sooner: the entry does not.
            (1, 50, 80, 300),
            // The longest-lived one expires sooner: the other rules decide.
            (2, 60, 90, 90),
            (2, 70, 75, 80),
            // Later than any: the entry follows.
            (1, 70, 500, 500),
            // A new rule counts like any other.
            (3, 600, 700, 700),
        ] {
            entry.update(rule, state(), now, rule_expiry);
            assert_eq!(entry.expires_at, entry_expiry, "rule {rule} at {now}");
        }
        assert_eq!(entry.rules.len(), 3);
    }

    #[test]
    fn expired_rule_states_are_invisible_and_pruned() {
        let mut shard = Shard::new(10);
        let entry = shard.entry(1, b"k", 0);
        entry.update(1, state(), 0, 100);
        entry.update(2, state(), 0, 300);
        fn found(shard: &Shard) -> &Entry {
            shard.find(1, b"k").unwrap()
        }
        assert!(found(&shard).state(1, 150).is_none());
        assert!(found(&shard).state(2, 150).is_some());
        assert_eq!(shard.evict_expired(150), 0);
        assert_eq!(found(&shard).rules.len(), 1);
        assert_eq!(shard.evict_expired(300), 1);
        assert_eq!(shard.len(), 0);
    }
}
