//! The in-process store: exact limits for one process, no network, bounded memory.

mod key;
#[cfg(feature = "concurrency")]
mod permits;
mod shard;

use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use self::key::bounded;
use self::shard::Shard;
use super::{Store, StoreFuture};
use crate::algorithm::{self, Write};
use crate::clock::{Clock, SystemClock};
use crate::decision::{Combined, Decision, Outcome, RuleVerdict, Verdicts};
use crate::key::Key;
use crate::policy::{MAX_RULES, Policy};
use crate::sync::lock;

/// The in-process store, the embedded default: exact, lock-sharded, never touches the network.
///
/// Each process counts on its own, so use it for single-instance services, for tests, or as a
/// fallback. Memory is bounded twice over: state is dropped once it no longer matters (when its
/// window ended, when its bucket drained) by a background sweep every second, and the number of
/// keys is capped (`max_keys`, default 1,000,000; when full, the key closest to expiry is
/// forgotten first). Clones share the same state.
///
/// ```
/// use tower_redis_ratelimit::{MemoryStore, Policy, Quota, Rule, Store, key::Key};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::new();
/// let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(2)))?;
/// let key = Key::from("client-1");
/// assert!(store.check(&key, &policy, 1).await?.is_allowed());
/// assert!(store.check(&key, &policy, 1).await?.is_allowed());
/// assert!(!store.check(&key, &policy, 1).await?.is_allowed());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    shards: Box<[Padded<Mutex<Shard>>]>,
    hasher: foldhash::fast::RandomState,
    clock: Arc<dyn Clock>,
    sweep_every: Duration,
    /// Whether the background sweep's task lives. The task clears it when it ends (its runtime
    /// shut down), so the next runtime that uses the store starts a new one.
    janitor_running: AtomicBool,
    /// Outside any Tokio runtime: checks left before looking for one again.
    janitor_wait: AtomicU32,
    /// Concurrency permits, sharded like `shards`, and their renewal (see permits.rs).
    #[cfg(feature = "concurrency")]
    permits: permits::Permits,
}

/// Keeps each shard's lock on its own cache line, so cores working on different shards do not
/// contend through false sharing.
#[repr(align(128))]
struct Padded<T>(T);

impl MemoryStore {
    /// A store with the default settings and the system clock.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Settings for a store.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            clock: None,
            max_keys: 1_000_000,
            shards: None,
            sweep_every: Duration::from_secs(1),
        }
    }

    /// The number of client keys held.
    pub fn len(&self) -> usize {
        self.inner
            .shards
            .iter()
            .map(|shard| lock(&shard.0).len())
            .sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops all state that no longer matters (expired concurrency permits included), and returns
    /// how many keys went. The background sweep calls this every second; call it yourself where
    /// no Tokio runtime runs.
    pub fn evict_expired(&self) -> usize {
        let keys = self.inner.evict_expired();
        #[cfg(feature = "concurrency")]
        let keys = keys + self.inner.evict_expired_permits();
        keys
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        // hashbrown indexes its table with the low bits and tags with the top seven, so the shard
        // is chosen with bits from the middle.
        &self.inner.shards[(hash >> 32) as usize & (self.inner.shards.len() - 1)].0
    }

    /// Starts the background sweep the first time the store is used inside a Tokio runtime.
    #[inline]
    fn ensure_janitor(&self) {
        if !self.inner.janitor_running.load(Ordering::Relaxed) {
            self.start_janitor();
        }
    }

    #[cold]
    fn start_janitor(&self) {
        // Looking for a runtime clones its handle (an atomic increment and decrement), so a store
        // used outside any runtime looks again only every `JANITOR_RETRY` checks. The countdown is
        // a plain load and store: a lost update between threads only shifts the next look.
        let wait = self.inner.janitor_wait.load(Ordering::Relaxed);
        if wait > 0 {
            self.inner.janitor_wait.store(wait - 1, Ordering::Relaxed);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner
                .janitor_wait
                .store(JANITOR_RETRY, Ordering::Relaxed);
            return;
        };
        if !self.inner.janitor_running.swap(true, Ordering::AcqRel) {
            let running = JanitorRunning(Arc::downgrade(&self.inner));
            drop(runtime.spawn(janitor(running, self.inner.sweep_every)));
        }
    }

    /// The decision on a request, and each rule's verdict into `verdicts` when given (see
    /// [`Verdicts`]).
    fn decide(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
        mut verdicts: Option<&mut Vec<RuleVerdict>>,
    ) -> Decision {
        let now = self.inner.clock.now_micros();
        let key = bounded(key);
        let hash = self.inner.hasher.hash_one(&*key);
        let cost = i64::from(cost);
        // Time is an integer count of µs, which the algorithms need below 2^53 (the year 2255), as
        // the scripts' doubles hold it exactly only there: past it, it stands still.
        let at = now.min(algorithm::MAX_EXACT as u64) as i64;

        let mut shard = lock(self.shard(hash));
        let mut combined = Combined::new();
        // One lookup: the entry found is read, then updated in place when the request passes.
        let found = shard.find_mut(hash, &key);
        if let ([params], &[id]) = (policy.params(), policy.rule_ids()) {
            // One rule, the common case. A step writes only when its rule admits the request,
            // which with one rule is every rule: its write lands at once, with nothing buffered
            // (the general path below cost a one-rule GCRA decision a quarter more instructions).
            // Looked up once, for the step's read and for its write.
            let position = found.as_deref().and_then(|entry| entry.position(id));
            let state = found
                .as_deref()
                .zip(position)
                .and_then(|(entry, position)| entry.state_at(position, now));
            // The verdict is taken within the algorithm's branch (see `step_then`).
            let write = algorithm::step_then(params, state, at, cost, |step| {
                combined.add(step.verdict);
                if let Some(verdicts) = verdicts.as_deref_mut() {
                    verdicts.push(step.verdict);
                }
                step.write
            });
            if let Some((write, ttl)) = write {
                debug_assert!(
                    combined.all_allowed(),
                    "a step wrote for a request it refused"
                );
                let expires_at = now.saturating_add(ttl);
                match found {
                    Some(entry) => entry.update_at(id, position, write, now, expires_at),
                    None => shard
                        .entry(hash, &key, now)
                        .update_at(id, None, write, now, expires_at),
                }
                shard.expires(expires_at);
            }
        } else {
            // Held until every rule is evaluated. A policy holds at most MAX_RULES rules (checked
            // when it is built); in an array, they need no buffer management.
            let mut writes: [Option<(Write, u64)>; MAX_RULES] = Default::default();
            let rules = policy.params().iter().zip(policy.rule_ids());
            for (index, (params, &id)) in rules.enumerate() {
                let state = found.as_deref().and_then(|entry| entry.state(id, now));
                let step = algorithm::step(params, state, at, cost);
                combined.add(step.verdict);
                if let Some(verdicts) = verdicts.as_deref_mut() {
                    verdicts.push(step.verdict);
                }
                writes[index] = step
                    .write
                    .map(|(write, ttl)| (write, now.saturating_add(ttl)));
            }
            // All or nothing: a rule's write lands only if every rule admitted the request.
            if combined.all_allowed() && writes.iter().any(Option::is_some) {
                let entry = match found {
                    Some(entry) => entry,
                    None => shard.entry(hash, &key, now),
                };
                let mut earliest = u64::MAX;
                for (pending, &id) in writes.iter_mut().zip(policy.rule_ids()) {
                    if let Some((write, expires_at)) = pending.take() {
                        entry.update(id, write, now, expires_at);
                        earliest = earliest.min(expires_at);
                    }
                }
                shard.expires(earliest);
            } else if let Some(verdicts) = verdicts.filter(|_| !combined.all_allowed()) {
                // Refused: nothing was counted, so a rule that would have admitted the request
                // tells what it has left (as `lua/decide.lua` replies).
                let each = policy.params().iter().zip(policy.rule_ids());
                for (verdict, (params, &id)) in verdicts.iter_mut().zip(each) {
                    if verdict.outcome() == Outcome::Allowed && cost > 0 {
                        let state = found.as_deref().and_then(|entry| entry.state(id, now));
                        *verdict =
                            verdict.with_counts_of(algorithm::step(params, state, at, 0).verdict);
                    }
                }
            }
        }
        drop(shard);
        combined.decision(policy)
    }
}

impl Inner {
    fn evict_expired(&self) -> usize {
        let now = self.clock.now_micros();
        self.shards
            .iter()
            .map(|shard| lock(&shard.0).evict_expired(now))
            .sum()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl Store for MemoryStore {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        self.ensure_janitor();
        StoreFuture::ready(Ok(self.decide(key, policy, cost, None)))
    }

    /// Every rule's verdict from the one step that decides.
    fn check_verdicts(
        self: Arc<Self>,
        key: &Key,
        policy: &Policy,
        cost: u32,
    ) -> StoreFuture<Verdicts> {
        self.ensure_janitor();
        let mut rules = Vec::with_capacity(policy.rules().len());
        let decision = self.decide(key, policy, cost, Some(&mut rules));
        StoreFuture::ready(Ok(Verdicts::new(decision, rules)))
    }

    /// Forgets what `policy`'s rules counted for `key`, at once; the state of other policies'
    /// rules for the key stays.
    fn reset(&self, key: &Key, policy: &Policy) -> StoreFuture<()> {
        let key = bounded(key);
        let hash = self.inner.hasher.hash_one(&*key);
        lock(self.shard(hash)).forget(hash, &key, policy.rule_ids());
        StoreFuture::ready(Ok(()))
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .finish_non_exhaustive()
    }
}

/// Settings for a [`MemoryStore`].
#[must_use]
pub struct MemoryStoreBuilder {
    clock: Option<Arc<dyn Clock>>,
    max_keys: usize,
    shards: Option<usize>,
    sweep_every: Duration,
}

impl MemoryStoreBuilder {
    /// The clock to read time from (default: [`SystemClock`]). Tests pass a
    /// [`ManualClock`](crate::clock::ManualClock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The most client keys held at once (default 1,000,000). When full, expired state goes
    /// first, then the key closest to expiry. Concurrency slots are capped by the same number,
    /// separately; a slot with live permits is never forgotten (an acquisition that finds every
    /// slot in use fails instead, and the layer applies its failure mode).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys.max(1);
        self
    }

    /// The number of independently locked shards, rounded up to a power of two (default: four per
    /// CPU, at least 16), and at most `max_keys`.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards.max(1));
        self
    }

    /// How often the background sweep drops state that no longer matters (default 1 s).
    pub fn sweep_every(mut self, every: Duration) -> Self {
        self.sweep_every = every.max(Duration::from_millis(1));
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        let shards = self
            .shards
            .unwrap_or((cpus * 4).max(16))
            .next_power_of_two()
            // No more shards than keys, so that every shard can hold at least one.
            .min(1 << self.max_keys.ilog2());
        // The shards' caps add up to `max_keys` exactly: rounding each one up would let the store
        // hold up to one key per shard more than it was allowed.
        let (per_shard, extra) = (self.max_keys / shards, self.max_keys % shards);
        let cap = |index: usize| per_shard + usize::from(index < extra);
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..shards)
                    .map(|index| Padded(Mutex::new(Shard::new(cap(index)))))
                    .collect(),
                hasher: foldhash::fast::RandomState::default(),
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock::new())),
                sweep_every: self.sweep_every,
                janitor_running: AtomicBool::new(false),
                janitor_wait: AtomicU32::new(0),
                #[cfg(feature = "concurrency")]
                permits: permits::Permits::new(shards, cap),
            }),
        }
    }
}

/// Checks made outside a Tokio runtime between two looks for one (see `start_janitor`).
const JANITOR_RETRY: u32 = 1024;

/// The janitor's claim on `Inner::janitor_running`, released when its task is dropped however it
/// ends: also unpolled, when a runtime shuts down before ever running it (so it is made before the
/// task's future and moved into it, not made inside the future's body).
struct JanitorRunning(Weak<Inner>);

impl Drop for JanitorRunning {
    fn drop(&mut self) {
        if let Some(store) = self.0.upgrade() {
            store.janitor_running.store(false, Ordering::Release);
        }
    }
}

/// Sweeps the store until it is dropped, or until the runtime it runs on shuts down.
async fn janitor(running: JanitorRunning, every: Duration) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(store) = running.0.upgrade() else {
            return;
        };
        let now = store.clock.now_micros();
        for shard in store.shards.iter() {
            lock(&shard.0).evict_expired(now);
            // One shard at a time, so a large sweep never holds a worker thread for long.
            tokio::task::yield_now().await;
        }
        #[cfg(feature = "concurrency")]
        store.evict_expired_permits();
    }
}
