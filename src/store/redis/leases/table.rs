//! [`Leases`]: the quota this process has reserved in Redis, per client key and policy, and the
//! demand each key shows here, which sizes its next reservation.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use hashbrown::HashTable;
use smallvec::SmallVec;
use tokio::sync::watch;

use super::config::QuotaLeases;
use super::script::{Granted, Mark};
use crate::algorithm::Algorithm;
use crate::decision::Decision;
use crate::key::Key;
use crate::policy::{MAX_RULES, Policy};
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
    lifetime_us: u64,
    max_share: f64,
    /// Whether the task that gives back expired leases was started.
    pub(super) sweeping: AtomicBool,
    /// Moves on with every reset: a grant asked in an earlier epoch is not kept (Redis may have
    /// taken it from the state the reset deleted).
    epoch: AtomicU64,
}

struct Shard {
    table: HashTable<Entry>,
    capacity: usize,
}

/// One client key under one policy.
struct Entry {
    hash: u64,
    key: Key,
    policy: Policy,
    /// Oldest first: a lease that runs low is followed by the next before it is used up.
    grants: SmallVec<[Grant; 2]>,
    /// A grant for this key is in flight: requests its slices cannot cover wait for it.
    granting: bool,
    /// Told when a grant lands or fails (made with the first grant).
    landed: Option<watch::Sender<()>>,
    /// Units asked here since `window_start`; `demand` holds the count of the last whole window
    /// (one lifetime long).
    window_start: u64,
    window_units: u64,
    demand: u64,
    last_seen: u64,
}

/// Units reserved by one grant.
struct Grant {
    left: u64,
    /// When Redis was asked (µs, this process's clock).
    at: u64,
    /// When the unspent units go back: a lifetime after `at`, and never later than the end of a
    /// fixed window the units were reserved in.
    expires: u64,
    /// Redis's decision on the reservation as a whole.
    decision: Decision,
    marks: SmallVec<[Mark; MAX_RULES]>,
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

/// Unspent units to give back.
pub(super) struct Refund {
    pub(super) key: Key,
    pub(super) policy: Policy,
    pub(super) units: u64,
    pub(super) marks: SmallVec<[Mark; MAX_RULES]>,
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
            lifetime_us: crate::clock::micros(settings.lifetime),
            max_share: settings.max_share,
            sweeping: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
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
    /// so that units given back can be returned exactly.
    pub(super) fn leasable(policy: &Policy) -> bool {
        policy.rules().iter().all(|rule| {
            matches!(
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
        let mut shard = self.shard(hash);
        let capacity = shard.capacity;
        let table = &mut shard.table;
        let entry = match table.find_mut(hash, |entry| entry.is(key, policy)) {
            Some(entry) => entry,
            None => {
                if table.len() < capacity {
                    table.insert_unique(hash, Entry::new(hash, key, policy, cost, now), |e| e.hash);
                }
                // A key seen for the first time is not known to be hot.
                return LeaseStep::Exact;
            }
        };
        entry.observe(cost, now, self.lifetime_us);
        entry.expire(now, refunds);
        let want = self.want(entry, cost);
        if let Some(decision) = entry.spend(cost, now) {
            let left = entry.left();
            let prefetch = (!entry.granting && left < want / LOW_WATER_DIVISOR).then(|| {
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
    /// `asked.1`) on behalf of a request of `cost` (0 for a grant asked in the background), and
    /// returns the decision on that request. Units that can no longer be kept (the key was
    /// forgotten meanwhile, or a reset came between) come back as a refund.
    pub(super) fn install(
        &self,
        key: &Key,
        policy: &Policy,
        cost: u32,
        (asked, epoch): (u64, u64),
        granted: Granted,
    ) -> (Decision, Option<Refund>) {
        let decision = granted.decision(policy);
        let hash = self.hash(key, policy);
        let mut shard = self.shard(hash);
        let reset = self.epoch.load(Ordering::Relaxed) != epoch;
        let mut entry = shard.table.find_mut(hash, |entry| entry.is(key, policy));
        let left = granted.units.saturating_sub(u64::from(cost));
        if reset && let Some(entry) = entry.take() {
            entry.land();
        }
        let Some(entry) = entry else {
            let refund = (left > 0).then(|| Refund {
                key: key.clone(),
                policy: policy.clone(),
                units: left,
                marks: granted.marks,
            });
            return (decision, refund);
        };
        entry.land();
        if granted.units == 0 {
            return (decision, None);
        }
        let expires = policy
            .rules()
            .iter()
            .zip(&granted.verdicts)
            .filter(|(rule, _)| rule.algorithm() == Algorithm::FixedWindow)
            .map(|(_, verdict)| asked.saturating_add(verdict.reset_after_us))
            .fold(asked.saturating_add(self.lifetime_us), u64::min);
        if left > 0 {
            entry.grants.push(Grant {
                left,
                at: asked,
                expires,
                decision: decision.clone(),
                marks: granted.marks,
            });
        }
        (decision.leased(entry.left(), 0), None)
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
    /// policy's largest lease, and never less than the request at hand.
    fn want(&self, entry: &Entry, cost: u64) -> u64 {
        let largest = entry
            .policy
            .rules()
            .iter()
            .map(|rule| (f64::from(rule.capacity()) * self.max_share) as u64)
            .min()
            .unwrap_or(0)
            .max(1);
        entry.demand.max(entry.window_units).min(largest).max(cost)
    }

    fn hash(&self, key: &Key, policy: &Policy) -> u64 {
        self.hasher.hash_one((key.as_bytes(), policy.rule_ids()))
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(hash >> 32) as usize % self.shards.len()])
    }
}

impl Entry {
    fn new(hash: u64, key: &Key, policy: &Policy, cost: u64, now: u64) -> Self {
        Self {
            hash,
            key: key.clone(),
            policy: policy.clone(),
            grants: SmallVec::new(),
            granting: false,
            landed: None,
            window_start: now,
            window_units: cost,
            demand: 0,
            last_seen: now,
        }
    }

    /// The grant in flight landed or failed: wake whoever waits for it.
    fn land(&mut self) {
        self.granting = false;
        if let Some(landed) = &self.landed {
            landed.send_replace(());
        }
    }

    fn is(&self, key: &Key, policy: &Policy) -> bool {
        self.key == *key && self.policy.same(policy)
    }

    /// Counts a request of `cost` into the key's demand.
    fn observe(&mut self, cost: u64, now: u64, lifetime_us: u64) {
        self.last_seen = now;
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed >= lifetime_us {
            // A window that ran long (an idle key) counts for what it held per lifetime.
            let per_lifetime = u128::from(self.window_units) * u128::from(lifetime_us)
                / u128::from(elapsed.max(1));
            self.demand = u64::try_from(per_lifetime).unwrap_or(u64::MAX);
            self.window_start = now;
            self.window_units = 0;
        }
        self.window_units = self.window_units.saturating_add(cost);
    }

    /// Moves the unspent units of grants expired by `now` into `refunds`.
    fn expire(&mut self, now: u64, refunds: &mut Vec<Refund>) {
        while let Some(grant) = self.grants.first() {
            if grant.expires > now {
                break;
            }
            let grant = self.grants.remove(0);
            if grant.left > 0 {
                refunds.push(Refund {
                    key: self.key.clone(),
                    policy: self.policy.clone(),
                    units: grant.left,
                    marks: grant.marks,
                });
            }
        }
    }

    /// Spends `cost` units of one grant, the oldest that holds them, and reports from the newest
    /// grant, Redis's latest word on the key (the older ones' counts predate it).
    fn spend(&mut self, cost: u64, now: u64) -> Option<Decision> {
        let index = self.grants.iter().position(|grant| grant.left >= cost)?;
        self.grants[index].left -= cost;
        let newest = self.grants.last().expect("a grant was spent");
        let (decision, at) = (newest.decision.clone(), newest.at);
        if self.grants[index].left == 0 {
            self.grants.remove(index);
        }
        Some(decision.leased(self.left(), now.saturating_sub(at)))
    }

    /// Units held in every grant.
    fn left(&self) -> u64 {
        self.grants.iter().map(|grant| grant.left).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::algorithm::RuleVerdict;
    use crate::decision::Outcome;
    use crate::policy::Rule;
    use crate::quota::Quota;

    const MS: u64 = 1_000;

    fn policy() -> Policy {
        Policy::try_from(Rule::gcra(
            "api",
            Quota::per_second(1_000).with_burst(1_000),
        ))
        .unwrap()
    }

    /// Redis's answer to a grant of `units`, from a bucket that held `before`.
    fn granted(units: u64, before: u64) -> Granted {
        Granted {
            units,
            verdicts: [RuleVerdict {
                outcome: if units > 0 {
                    Outcome::Allowed
                } else {
                    Outcome::Denied
                },
                remaining: 1_000 - before - units,
                used: before + units,
                reset_after_us: (before + units) * MS,
                retry_after_us: 0,
            }]
            .into_iter()
            .collect(),
            marks: [[0, 0]].into_iter().collect(),
        }
    }

    fn plan(leases: &Leases, key: &str, now: u64, refunds: &mut Vec<Refund>) -> LeaseStep {
        leases.plan(&Key::from(key), &policy(), 1, now, refunds)
    }

    #[test]
    fn a_key_is_leased_once_it_proves_hot_and_its_lease_follows_its_demand() {
        let leases = Leases::new(&QuotaLeases::default());
        let mut refunds = Vec::new();
        assert!(matches!(
            plan(&leases, "k", 0, &mut refunds),
            LeaseStep::Exact
        ));
        let LeaseStep::Grant { want } = plan(&leases, "k", MS, &mut refunds) else {
            panic!("a second request in a lifetime asks for a lease");
        };
        assert_eq!(want, 2);
        // A grant in flight: the next request waits for it rather than asking Redis.
        assert!(matches!(
            plan(&leases, "k", MS, &mut refunds),
            LeaseStep::Wait(_)
        ));
        let (decision, refund) =
            leases.install(&Key::from("k"), &policy(), 1, (MS, 0), granted(2, 1));
        assert!(refund.is_none());
        assert_eq!((decision.used(), decision.remaining()), (2, 998));
        let LeaseStep::Local { decision, .. } = plan(&leases, "k", 2 * MS, &mut refunds) else {
            panic!("answered from the lease");
        };
        assert_eq!((decision.used(), decision.remaining()), (3, 997));
        // 500 requests in the next lifetime: the lease after it is sized to them, within a
        // tenth of the burst.
        for i in 0..500 {
            let _ = plan(&leases, "k", 101 * MS + i, &mut refunds);
            leases.abandon(&Key::from("k"), &policy());
        }
        let LeaseStep::Grant { want } = plan(&leases, "k", 202 * MS, &mut refunds) else {
            panic!("a new lease");
        };
        assert_eq!(want, 100);
        assert!(refunds.is_empty());
    }

    #[test]
    fn expired_units_are_handed_back_and_idle_keys_forgotten() {
        let leases = Leases::new(&QuotaLeases::default().lifetime(Duration::from_millis(100)));
        let key = Key::from("k");
        let mut refunds = Vec::new();
        let _ = plan(&leases, "k", 0, &mut refunds);
        let _ = plan(&leases, "k", 0, &mut refunds);
        let _ = leases.install(&key, &policy(), 1, (0, 0), granted(50, 1));
        leases.sweep(99 * MS, &mut refunds);
        assert!(refunds.is_empty());
        leases.sweep(100 * MS, &mut refunds);
        assert_eq!(refunds.len(), 1);
        assert_eq!(refunds[0].units, 49);
        assert_eq!(leases.len(), 1);
        leases.sweep(300 * MS, &mut refunds);
        assert_eq!(leases.len(), 0);
    }

    #[test]
    fn the_table_holds_at_most_max_keys() {
        let leases = Leases::new(&QuotaLeases::default().max_keys(100));
        let mut refunds = Vec::new();
        for i in 0..10_000 {
            let _ = plan(&leases, &format!("client-{i}"), 0, &mut refunds);
        }
        assert!(leases.len() <= 100, "{} keys", leases.len());
        assert!(leases.len() >= 50, "{} keys", leases.len());
    }

    #[test]
    fn units_reserved_for_a_forgotten_key_go_back() {
        let leases = Leases::new(&QuotaLeases::default());
        let (decision, refund) =
            leases.install(&Key::from("gone"), &policy(), 1, (0, 0), granted(10, 0));
        assert!(decision.is_allowed());
        assert_eq!(refund.map(|refund| refund.units), Some(9));
    }

    #[test]
    fn sliding_algorithms_are_not_leased() {
        let leases = Leases::new(&QuotaLeases::default());
        let policy = Policy::try_from(Rule::sliding_log("log", Quota::per_second(10))).unwrap();
        let mut refunds = Vec::new();
        for _ in 0..10 {
            assert!(matches!(
                leases.plan(&Key::from("k"), &policy, 1, 0, &mut refunds),
                LeaseStep::Exact
            ));
        }
    }
}
