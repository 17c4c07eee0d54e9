//! [`Entry`]: what this process holds of one key under one policy: its grants, when their units
//! may be spent, a refusal to remember, and the demand that sizes the next grant.

use smallvec::SmallVec;
use tokio::sync::watch;

use super::script::{Granted, Mark, Pace};
use crate::decision::{Decision, Outcome};
use crate::key::Key;
use crate::policy::{MAX_RULES, Policy};

/// Unspent units to give back.
pub(super) struct Refund {
    pub(super) key: Key,
    pub(super) policy: Policy,
    pub(super) units: u64,
    pub(super) marks: SmallVec<[Mark; MAX_RULES]>,
}

/// One client key under one policy.
pub(super) struct Entry {
    pub(super) hash: u64,
    pub(super) key: Key,
    pub(super) policy: Policy,
    /// Oldest first: a lease that runs low is followed by the next before it is used up.
    pub(super) grants: SmallVec<[Grant; 2]>,
    /// A grant for this key is in flight: requests its slices cannot cover wait for it.
    pub(super) granting: bool,
    /// Told when a grant lands or fails (made with the first grant).
    pub(super) landed: Option<watch::Sender<()>>,
    /// Redis refused the last grant until then: answered here, without asking again.
    refused: Option<Refusal>,
    /// Units asked here since `window_start`; `demand` holds the count of the last whole window
    /// (one lifetime long).
    window_start: u64,
    window_units: u64,
    pub(super) demand: u64,
    pub(super) last_seen: u64,
}

/// A grant Redis refused: every request of the key is refused until `until`, as Redis would
/// (capacity comes back only with time; units that others give back early are not seen, as the
/// denial cache does not see them).
struct Refusal {
    /// The cost of the refused request: requests of another cost ask Redis (one larger than the
    /// capacity is never admitted, which Redis says distinctly).
    cost: u64,
    decision: Decision,
    /// When Redis was asked (µs, this process's clock).
    at: u64,
    until: u64,
}

/// Units reserved by one grant.
pub(super) struct Grant {
    units: u64,
    /// Units spent, in order: the next is unit `taken + 1`.
    taken: u64,
    /// When Redis was asked (µs, this process's clock).
    at: u64,
    /// When Redis's answer was taken in: the units' paces count from then (no earlier than Redis
    /// reckoned them).
    landed: u64,
    /// When the unspent units go back: a lifetime after `at`, and never later than the end of a
    /// fixed window the units were reserved in.
    pub(super) expires: u64,
    /// Redis's decision on the reservation as a whole.
    decision: Decision,
    marks: SmallVec<[Mark; MAX_RULES]>,
    /// When each bucket rule lets the units be spent.
    paces: SmallVec<[Pace; MAX_RULES]>,
}

impl Grant {
    /// The units Redis granted at `at`, answered at `landed`, to give back at `expires`.
    pub(super) fn new(
        granted: Granted,
        decision: Decision,
        at: u64,
        landed: u64,
        expires: u64,
    ) -> Self {
        Self {
            units: granted.units,
            taken: 0,
            at,
            landed,
            expires,
            decision,
            marks: granted.marks,
            paces: granted.paces,
        }
    }

    fn left(&self) -> u64 {
        self.units - self.taken
    }

    /// When its next `cost` units may be spent (µs, this process's clock): once the last of
    /// them conforms under every bucket rule.
    fn ready_at(&self, cost: u64) -> u64 {
        let unit = self.taken + cost;
        self.paces
            .iter()
            .map(|pace| pace.ready(unit))
            .max()
            .map_or(self.landed, |wait| self.landed.saturating_add(wait))
    }

    /// Its unspent units, to give back.
    pub(super) fn refund(self, key: &Key, policy: &Policy) -> Option<Refund> {
        (self.left() > 0).then(|| Refund {
            key: key.clone(),
            policy: policy.clone(),
            units: self.left(),
            marks: self.marks,
        })
    }
}

impl Entry {
    pub(super) fn new(hash: u64, key: &Key, policy: &Policy, cost: u64, now: u64) -> Self {
        Self {
            hash,
            key: key.clone(),
            policy: policy.clone(),
            grants: SmallVec::new(),
            granting: false,
            landed: None,
            refused: None,
            window_start: now,
            window_units: cost,
            demand: 0,
            last_seen: now,
        }
    }

    /// The grant in flight landed or failed: wake whoever waits for it.
    pub(super) fn land(&mut self) {
        self.granting = false;
        if let Some(landed) = &self.landed {
            landed.send_replace(());
        }
    }

    pub(super) fn is(&self, key: &Key, policy: &Policy) -> bool {
        self.key == *key && self.policy.same(policy)
    }

    /// Counts a request of `cost` into the key's demand.
    pub(super) fn observe(&mut self, cost: u64, now: u64, lifetime_us: u64) {
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

    /// What the key asked here in the last lifetime, or in this one if more.
    pub(super) fn demand(&self) -> u64 {
        self.demand.max(self.window_units)
    }

    /// Moves the unspent units of grants expired by `now` into `refunds`.
    pub(super) fn expire(&mut self, now: u64, refunds: &mut Vec<Refund>) {
        while let Some(grant) = self.grants.first() {
            if grant.expires > now {
                break;
            }
            let grant = self.grants.remove(0);
            refunds.extend(grant.refund(&self.key, &self.policy));
        }
    }

    /// Takes in a grant Redis answered at `landed` for a request of `cost` (`units` 0:
    /// refused, with `decision`).
    pub(super) fn take(&mut self, grant: Grant, cost: u64) {
        self.land();
        if grant.units > 0 {
            self.refused = None;
            self.grants.push(grant);
        } else if grant.decision.outcome() == Outcome::Denied {
            let wait = grant.decision.retry_after().map_or(0, crate::clock::micros);
            // From when Redis was asked, as the denial cache counts: the refusal ends no later
            // than Redis's own.
            self.refused = Some(Refusal {
                cost,
                until: grant.at.saturating_add(wait),
                at: grant.at,
                decision: grant.decision,
            });
        }
    }

    /// The answer to a request of `cost` at `now` from what is held here: from a grant's units,
    /// the oldest that holds them (reported from the newest grant, Redis's latest word on the
    /// key), a refusal while they do not conform yet, or Redis's refusal while it lasts. `None`
    /// when Redis must be asked.
    pub(super) fn spend(&mut self, cost: u64, now: u64) -> Option<Decision> {
        let Some(index) = self.grants.iter().position(|grant| grant.left() >= cost) else {
            let refused = self
                .refused
                .as_ref()
                .filter(|refused| now < refused.until && refused.cost == cost)?;
            return Some(refused.decision.aged(now.saturating_sub(refused.at)));
        };
        let newest = self.grants.last().expect("a grant holds units");
        let (decision, at) = (newest.decision.clone(), newest.at);
        let ready = self.grants[index].ready_at(cost);
        if now < ready {
            return Some(decision.leased_wait(ready - now, now.saturating_sub(at)));
        }
        self.grants[index].taken += cost;
        if self.grants[index].left() == 0 {
            self.grants.remove(index);
        }
        Some(decision.leased(self.left(), now.saturating_sub(at)))
    }

    /// Units held in every grant.
    pub(super) fn left(&self) -> u64 {
        self.grants.iter().map(Grant::left).sum()
    }
}
