//! [`Leases`]: the quota this process has reserved in Redis, per client key and policy, and the
//! demand each key shows here, which sizes its next reservation.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;
use tokio::sync::watch;

use super::config::QuotaLeases;
pub(super) use super::entry::Refund;
use super::entry::{Entry, Grant};
use super::heat::Heat;
use super::script::{Granted, horizon};
use crate::algorithm::Algorithm;
use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;
use crate::sync::lock;

/// How many shards the table is split into (each its own lock), at most.
const SHARDS: usize = 16;

/// A lease runs low, and the next one is asked for in the background, when fewer units than this
/// share of the next lease's size are left.
const LOW_WATER_DIVISOR: u64 = 4;

/// The leases of one store.
pub(in crate::store::redis) struct Leases {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    /// Which keys may be hot, counted without a lock: the others never reach the table.
    heat: Heat,
    lifetime_us: u64,
    max_share: f64,
    /// Whether the task that gives back expired leases was started.
    pub(super) sweeping: AtomicBool,
    /// Moves on with every reset: a grant asked in an earlier epoch is not kept (Redis may have
    /// taken it from the state the reset deleted).
    epoch: AtomicU64,
    /// Grants and refunds in flight, and who waits for them to settle
    /// (`RedisStore::return_leases`).
    in_flight: Arc<Settling>,
}

/// Calls in flight (grants, refunds), and who waits for them to settle.
#[derive(Default)]
struct Settling {
    count: AtomicUsize,
    settled: tokio::sync::Notify,
}

/// A grant or refund in flight, counted from the moment it was started (before its task first
/// runs: `return_leases` right after a request must wait for the grant that request began)
/// until it is dropped.
pub(super) struct InFlight(Arc<Settling>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.settled.notify_waiters();
    }
}

struct Shard {
    table: HashTable<Entry>,
    capacity: usize,
}

/// What to do with a request.
pub(super) enum LeaseStep {
    /// Answered from a lease. When it ran low, `prefetch` asks for the next one (of that many
    /// units) in the background.
    Local {
        decision: Decision,
        prefetch: Option<u64>,
    },
    /// Reserve up to `want` units, this request's included, in one call.
    Grant { want: u64 },
    /// A grant is on its way: plan again when it has landed (or failed). Asking Redis meanwhile
    /// would find the units it reserves gone, and deny while this process holds them.
    Wait(watch::Receiver<()>),
    /// Ask Redis about this request alone (a key not hot enough here, a policy that cannot be
    /// leased).
    Exact,
}

impl Leases {
    pub(in crate::store::redis) fn new(settings: &QuotaLeases) -> Self {
        let shards = SHARDS.min(settings.max_keys);
        let (per_shard, extra) = (settings.max_keys / shards, settings.max_keys % shards);
        Self {
            shards: (0..shards)
                .map(|index| {
                    Mutex::new(Shard {
                        table: HashTable::new(),
                        capacity: per_shard + usize::from(index < extra),
                    })
                })
                .collect(),
            hasher: foldhash::fast::RandomState::default(),
            heat: Heat::new(settings.max_keys, crate::clock::micros(settings.lifetime)),
            lifetime_us: crate::clock::micros(settings.lifetime),
            max_share: settings.max_share,
            sweeping: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            in_flight: Arc::default(),
        }
    }

    /// Counts a grant or refund in flight until the guard is dropped.
    pub(super) fn in_flight(&self) -> InFlight {
        self.in_flight.count.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(&self.in_flight))
    }

    /// Waits until no grant or refund is in flight.
    pub(super) async fn settled(&self) {
        loop {
            let mut notified = std::pin::pin!(self.in_flight.settled.notified());
            notified.as_mut().enable();
            if self.in_flight.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The current epoch, to give [`install`](Self::install) a grant asked now.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Forgets the leases of every key and policy that `covered` names, whose state a reset
    /// deleted: their units are dropped, not given back (they were taken from the state that is
    /// gone; a refund would lower the fresh one). Grants in flight are given back when they land.
    pub(in crate::store::redis) fn forget(&self, covered: impl Fn(&Key, &Policy) -> bool) {
        // As in `Denials::forget`: the epoch first, then each shard under its lock.
        self.epoch.fetch_add(1, Ordering::Relaxed);
        for shard in self.shards.iter() {
            lock(shard)
                .table
                .retain(|entry| !covered(&entry.key, &entry.policy));
        }
    }

    /// Hands over the unspent units of every lease, to give back, and moves the epoch on: what
    /// this process holds may predate a reset it did not hear of.
    pub(super) fn forget_all(&self, refunds: &mut Vec<Refund>) {
        self.epoch.fetch_add(1, Ordering::Relaxed);
        self.sweep(u64::MAX, refunds);
    }

    pub(super) fn lifetime_us(&self) -> u64 {
        self.lifetime_us
    }

    /// Whether `policy` can be leased: every rule's capacity comes back either all at once, at
    /// a window's end (fixed window), or by the same measure as it is used (GCRA, token bucket),
    /// so that units given back can be returned exactly; and no rule delays a request (a
    /// lessee refuses a unit that is not due yet, where Redis would admit it to wait).
    pub(super) fn leasable(policy: &Policy) -> bool {
        policy.rules().iter().all(|rule| {
            rule.max_delay().is_none()
                && matches!(
                    rule.algorithm(),
                    Algorithm::FixedWindow | Algorithm::Gcra | Algorithm::TokenBucket
                )
        })
    }

    /// Decides how to answer a request of `cost` for `key` under `policy` at `now` (µs), and
    /// hands over the expired units of the key's leases, to give back.
    pub(super) fn plan(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
        now: u64,
        refunds: &mut Vec<Refund>,
    ) -> LeaseStep {
        if cost == 0 || !Self::leasable(policy) {
            return LeaseStep::Exact;
        }
        let cost = u64::from(cost);
        let hash = self.hash(key, policy);
        // A key asked once a lifetime here costs a counter, no lock (see `Heat`).
        if !self.heat.warm(hash, now) {
            return LeaseStep::Exact;
        }
        let mut shard = self.shard(hash);
        let capacity = shard.capacity;
        let table = &mut shard.table;
        if table.find(hash, |entry| entry.is(key, policy)).is_none() {
            if table.len() >= capacity {
                return LeaseStep::Exact;
            }
            // The table measures the key's demand itself from here: a key that only shares its
            // counter with another never gets a lease.
            table.insert_unique(hash, Entry::new(hash, key, policy, 0, now), |e| e.hash);
        }
        let entry = table
            .find_mut(hash, |entry| entry.is(key, policy))
            .expect("found or just inserted");
        entry.observe(cost, now, self.lifetime_us);
        entry.expire(now, refunds);
        let want = self.want(entry, cost);
        if let Some(decision) = entry.spend(cost, now) {
            let left = entry.left();
            let prefetch = (!entry.granting
                && decision.is_allowed()
                && left < want / LOW_WATER_DIVISOR)
                .then(|| {
                    entry.granting = true;
                    want
                });
            return LeaseStep::Local { decision, prefetch };
        }
        if entry.granting {
            let landed = entry.landed.get_or_insert_with(|| watch::channel(()).0);
            return LeaseStep::Wait(landed.subscribe());
        }
        if want <= cost {
            return LeaseStep::Exact;
        }
        entry.granting = true;
        LeaseStep::Grant { want }
    }

    /// Takes in Redis's answer to a grant asked at `asked` (µs, in [`epoch`](Self::epoch)
    /// `asked.1`) and answered at `landed`, on behalf of a request of `cost` (0 for a grant asked
    /// in the background), and returns the decision on that request. Units that can no longer
    /// be kept (the key was forgotten meanwhile, or a reset came between) come back as a refund.
    pub(super) fn install(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
        (asked, epoch): (u64, u64),
        landed: u64,
        granted: Granted,
    ) -> (Decision, Option<Refund>) {
        let decision = granted.decision(policy);
        let expires = policy
            .rules()
            .iter()
            .zip(&granted.verdicts)
            .filter(|(rule, _)| rule.algorithm() == Algorithm::FixedWindow)
            .map(|(_, verdict)| asked.saturating_add(verdict.full_after_us))
            .fold(asked.saturating_add(self.lifetime_us), u64::min);
        let grant = Grant::new(granted, decision.clone(), asked, landed, expires);
        let hash = self.hash(key, policy);
        let mut shard = self.shard(hash);
        let reset = self.epoch.load(Ordering::Relaxed) != epoch;
        let mut entry = shard.table.find_mut(hash, |entry| entry.is(key, policy));
        if reset && let Some(entry) = entry.take() {
            entry.land();
        }
        let Some(entry) = entry else {
            // Nowhere to keep the units: every one goes back, but those of the request, if
            // one asked (a slice asked in the background spends none), which is answered as
            // Redis decided the reservation only if its own units conform now.
            let mut alone = Entry::new(hash, key, policy, 0, landed);
            alone.take(grant, u64::from(cost).max(1));
            let answer = (cost > 0)
                .then(|| alone.spend(u64::from(cost), landed))
                .flatten();
            let refund = alone
                .grants
                .pop()
                .and_then(|grant| grant.refund(key, policy));
            return (answer.unwrap_or(decision), refund);
        };
        entry.take(grant, u64::from(cost).max(1));
        if cost == 0 {
            return (decision, None);
        }
        let answer = entry.spend(u64::from(cost), landed);
        (answer.unwrap_or(decision), None)
    }

    /// A grant failed or was denied in the background: the key may ask again.
    pub(super) fn abandon(&self, key: &Key, policy: &Policy) {
        let hash = self.hash(key, policy);
        if let Some(entry) = self
            .shard(hash)
            .table
            .find_mut(hash, |entry| entry.is(key, policy))
        {
            entry.land();
        }
    }

    /// Hands over the unspent units of every lease that expired by `now` (or of every lease,
    /// with `now` at `u64::MAX`), and forgets keys idle for two lifetimes.
    pub(super) fn sweep(&self, now: u64, refunds: &mut Vec<Refund>) {
        let idle_after = self.lifetime_us.saturating_mul(2);
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            for entry in shard.table.iter_mut() {
                entry.expire(now, refunds);
            }
            shard.table.retain(|entry| {
                entry.granting
                    || !entry.grants.is_empty()
                    || now.saturating_sub(entry.last_seen) < idle_after
            });
        }
    }

    /// How many keys the table holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).table.len())
            .sum()
    }

    /// The size of the next lease for a key: what it asked here in about a lifetime, within the
    /// policy's largest lease, and never less than the request at hand. A rule's largest lease
    /// is `max_share` of what it can give in a lifetime: its capacity, and for a bucket what
    /// drains back meanwhile (its horizon).
    fn want(&self, entry: &Entry, cost: u64) -> u64 {
        let largest = entry
            .policy
            .rules()
            .iter()
            .zip(entry.policy.params())
            .map(|(rule, params)| {
                let ahead = horizon(params, self.lifetime_us) / params.period.max(1);
                let units = u64::from(rule.capacity()) + u64::try_from(ahead).unwrap_or(0);
                (units as f64 * self.max_share) as u64
            })
            .min()
            .unwrap_or(0)
            .max(1);
        entry.demand().min(largest).max(cost)
    }

    fn hash(&self, key: &Key, policy: &Policy) -> u64 {
        self.hasher.hash_one((key.as_bytes(), policy.rule_ids()))
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(hash >> 32) as usize % self.shards.len()])
    }
}

#[cfg(test)]
mod tests;
