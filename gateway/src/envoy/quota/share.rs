//! One bucket's quota split among the Envoys that report it: the state transition that
//! `lua/shares.lua` makes in Redis, here for the in-process store and as its specification.
//!
//! Each Envoy (a *holder*: one stream to one `serve` instance) has an entry: the share of the
//! limit it was last assigned (tokens per period), its demand, and, after its share was
//! lowered, the higher share it may still be spending (`held`) until the assignment that
//! carried it has expired at the Envoy (`held_until`). What an entry *reserves* is its share,
//! or its held share while that lasts. Shares are raised only out of what no entry reserves,
//! so the reserved shares never sum to more than the limit (a limit lowered by a reload
//! aside, until the holds end), and every token bucket in force at an Envoy is one that
//! some entry reserves.

use std::collections::HashMap;

pub use tower_redis_ratelimit::store::ShareTiming as Timing;

/// One Envoy's entry in a bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The share last assigned, in tokens per period.
    pub share: u64,
    /// A higher share assigned before, possibly still in force at the Envoy.
    pub held: u64,
    /// Until when `held` is reserved (ms).
    pub held_until: u64,
    /// The Envoy's demand, in requests per period (allowed and denied).
    pub demand: u64,
    /// When the share was last sent (ms): it is in force at most `ttl + grace` after it.
    pub sent_at: u64,
    /// When the share last changed (ms).
    pub changed_at: u64,
    /// When the entry is forgotten (ms): renewed by every settle, so an instance that dies
    /// frees its Envoys' shares once their assignments have expired.
    pub expires: u64,
    /// The Envoy's stream has ended: its share is 0, its held share runs out.
    pub leaving: bool,
}

impl Entry {
    /// What it keeps from the others at `now`.
    pub fn reserved(&self, now: u64) -> u64 {
        if self.held_until > now {
            self.share.max(self.held)
        } else {
            self.share
        }
    }

    /// Lowers its share to `share`, keeping the one sent last reserved until it has expired.
    /// A hold still running is kept too, at the larger of the two shares until the later end:
    /// safe, and exact when shares change at most once per `ttl + grace`, since the hold of
    /// the previous change has then ended.
    fn lower(&mut self, share: u64, timing: Timing, now: u64) {
        let until = self.sent_at + timing.ttl_ms + timing.grace_ms;
        self.held = self.reserved(now);
        self.held_until = self.held_until.max(until);
        self.share = share;
    }
}

/// Settles `holder`'s share of a bucket of `limit` tokens per period at `now`, with its
/// `demand`: the entries that expired are dropped, its entry updated, and its share (what
/// its assignment carries from now on) returned.
///
/// The target is the limit split in proportion to the demands (evenly while every demand is
/// 0), rounded down; the share moves towards it when
/// it differs by more than a tenth, at most once per `min_change_ms`, and is raised only as
/// far as the others' reservations leave free.
pub fn settle(
    entries: &mut HashMap<String, Entry>,
    holder: &str,
    demand: u64,
    limit: u64,
    now: u64,
    timing: Timing,
) -> u64 {
    entries.retain(|_, entry| entry.expires > now);
    let mut me = entries.remove(holder).unwrap_or_default();
    me.demand = demand;
    me.leaving = false;
    // Shares in proportion to the demands; evenly while no one asks anything.
    let staying = || entries.values().filter(|entry| !entry.leaving);
    let demands: u64 = staying().map(|entry| entry.demand).sum::<u64>() + me.demand;
    let (mine, total) = if demands == 0 {
        (1, staying().count() as u64 + 1)
    } else {
        (me.demand, demands)
    };
    let target =
        u64::try_from(u128::from(limit) * u128::from(mine) / u128::from(total)).unwrap_or(limit);
    let others: u64 = entries.values().map(|entry| entry.reserved(now)).sum();
    let candidate = target.min(limit.saturating_sub(others));
    let step = candidate.abs_diff(me.share);
    let worth_it = me.share == 0 || candidate == 0 || step * 10 > me.share;
    let due = me.changed_at == 0 || now.saturating_sub(me.changed_at) >= timing.min_change_ms;
    if step > 0 && worth_it && due {
        if candidate < me.share {
            me.lower(candidate, timing, now);
        } else {
            me.share = candidate;
        }
        me.changed_at = now;
    }
    me.sent_at = now;
    me.expires = (now + timing.ttl_ms + timing.grace_ms).max(me.held_until);
    let share = me.share;
    entries.insert(holder.to_owned(), me);
    share
}

/// `holder`'s stream ended at `now`: its share goes to 0 for the split, and stays reserved
/// until its last assignment has expired at the Envoy; then the entry is forgotten.
pub fn leave(entries: &mut HashMap<String, Entry>, holder: &str, now: u64, timing: Timing) {
    entries.retain(|_, entry| entry.expires > now);
    if let Some(me) = entries.get_mut(holder) {
        me.lower(0, timing, now);
        me.demand = 0;
        me.leaving = true;
        me.expires = me.held_until;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMING: Timing = Timing {
        ttl_ms: 2_000,
        grace_ms: 1_000,
        min_change_ms: 2_000,
    };

    fn reserved(entries: &HashMap<String, Entry>, now: u64) -> u64 {
        entries.values().map(|entry| entry.reserved(now)).sum()
    }

    #[test]
    fn one_envoy_gets_the_whole_limit() {
        let mut entries = HashMap::new();
        assert_eq!(settle(&mut entries, "a", 5, 100, 1, TIMING), 100);
    }

    #[test]
    fn a_newcomer_gets_only_what_is_free_until_the_lowered_share_has_expired() {
        let mut entries = HashMap::new();
        assert_eq!(settle(&mut entries, "a", 200, 100, 1, TIMING), 100);
        // b arrives: the whole limit is a's, so b gets nothing yet.
        assert_eq!(settle(&mut entries, "b", 200, 100, 500, TIMING), 0);
        // a is lowered to half (its next report), but its 100 stays reserved...
        assert_eq!(settle(&mut entries, "a", 200, 100, 2_001, TIMING), 50);
        assert_eq!(reserved(&entries, 2_001), 100);
        assert_eq!(settle(&mut entries, "b", 200, 100, 2_500, TIMING), 0);
        // ...until what was sent last with 100 (at 1) has expired: 1 + 2 s + 1 s.
        assert_eq!(settle(&mut entries, "b", 200, 100, 3_002, TIMING), 50);
        assert_eq!(reserved(&entries, 3_002), 100);
    }

    #[test]
    fn shares_follow_demand_and_never_sum_past_the_limit() {
        let mut entries = HashMap::new();
        let demands = [(300, 100, 0), (0, 300, 100), (100, 0, 300)];
        let mut now = 1;
        for (a, b, c) in demands {
            for _ in 0..10 {
                for (holder, demand) in [("a", a), ("b", b), ("c", c)] {
                    settle(&mut entries, holder, demand, 90, now, TIMING);
                    assert!(reserved(&entries, now) <= 90, "{entries:?}");
                    now += 333;
                }
            }
            let total = a + b + c;
            for (holder, demand) in ["a", "b", "c"].iter().zip([a, b, c]) {
                let expected = 90 * demand / total;
                let share = entries[*holder].share;
                assert!(
                    share.abs_diff(expected) * 5 <= expected.max(5),
                    "{entries:?}"
                );
            }
        }
    }

    #[test]
    fn a_stream_that_ends_frees_its_share_once_its_assignment_expired() {
        let mut entries = HashMap::new();
        assert_eq!(settle(&mut entries, "a", 10, 100, 1, TIMING), 100);
        leave(&mut entries, "a", 1_000, TIMING);
        assert_eq!(settle(&mut entries, "b", 10, 100, 1_500, TIMING), 0);
        assert_eq!(settle(&mut entries, "b", 10, 100, 3_001, TIMING), 100);
        assert!(!entries.contains_key("a"));
    }

    #[test]
    fn an_instance_that_stops_settling_frees_its_shares_after_the_ttl_and_grace() {
        let mut entries = HashMap::new();
        assert_eq!(settle(&mut entries, "a", 10, 100, 1, TIMING), 100);
        assert_eq!(settle(&mut entries, "b", 10, 100, 2_999, TIMING), 0);
        assert_eq!(settle(&mut entries, "b", 10, 100, 3_001, TIMING), 100);
    }
}
