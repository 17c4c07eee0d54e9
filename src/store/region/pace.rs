//! [`Pace`]: what a region's leader asks of the ledger for one window at a tick, or gives back.
//!
//! A region holds what its rate of asks spends in a *horizon* (twice a tick and a move's
//! timeout), not the whole window's need: the units it will not spend soon stay free on the
//! ledger, where a region whose demand appears takes its share in one round trip, without
//! waiting for this one to give them back. It reports its demand again when it changed by more
//! than a tenth, and every few ticks while it holds unspent units, so that the ledger's shares
//! follow every region's demand and the take's answer tells a region holding more than its
//! share what the others wait for (the mover then gives that back).

use super::allotment::Counts;

/// A region's demand for a key as its leader reads it at a tick, and how far ahead it holds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pace {
    /// Units asked per µs in the region.
    pub(super) rate: f64,
    /// Units per window at that rate: the demand the ledger shares the quota by.
    pub(super) demand: u64,
    pub(super) quota: u64,
    /// Units asked beyond the need, and kept beyond it before a surplus is given back: two
    /// ticks' worth.
    pub(super) margin: f64,
    /// µs of spending a region holds ahead.
    pub(super) horizon_us: f64,
    pub(super) tick_us: u64,
    /// µs after which an unchanged demand is reported again while the region holds unspent
    /// units: the answer says whether others wait for them.
    pub(super) report_every_us: u64,
}

/// What the ledger last heard of the region's demand for a window, and when it was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Report {
    pub(super) demand: u64,
    pub(super) at_us: u64,
}

/// What a leader does for one window at a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Intent {
    /// Take `want` units, reporting the demand (0 units: only report it).
    Take { want: u64 },
    /// Give back up to `most` unspent units.
    Surrender { most: u64 },
}

/// Fewer units than this are not worth a move on their own: a fiftieth of the quota.
fn worth_moving(quota: u64) -> u64 {
    (quota / 50).max(1)
}

impl Pace {
    /// What to do for a window of which the region holds and spent `counts`, with `left_us`
    /// of spending left in it (all of it for a window not open yet), the ledger having last
    /// heard `reported` from this leader.
    pub(super) fn plan(
        &self,
        counts: Counts,
        left_us: f64,
        reported: Option<Report>,
        now_us: u64,
    ) -> Option<Intent> {
        let unspent = counts.unspent() as f64;
        let soon = self.rate * left_us.min(self.horizon_us);
        let want = ((soon + self.margin - unspent).ceil().max(0.0) as u64)
            .min(self.quota.saturating_sub(counts.held));
        // Within a horizon of the window's end, whatever is missing; before, once what is held
        // falls below three quarters of a horizon's spending (one and a half ticks and move
        // timeouts: a take planned then lands before the units run out, on a loaded machine
        // too), so that a steady demand takes once per quarter horizon rather than every tick.
        let low = left_us <= self.horizon_us
            || unspent < self.rate * self.horizon_us * 0.75 + self.margin;
        if want > 0 && low {
            return Some(Intent::Take { want });
        }
        // Units it will not spend soon: given back first (demand that moves away frees them
        // for the regions it moves to), then the demand reported again.
        let keep = self.rate * left_us.min(2.0 * self.horizon_us) + 2.0 * self.margin;
        let surplus = (unspent - keep.ceil()).max(0.0) as u64;
        if surplus > worth_moving(self.quota) {
            return Some(Intent::Surrender { most: surplus });
        }
        // A demand reported here that has gone: reported as zero, its share goes to the others.
        if self.demand == 0 && reported.is_some() {
            return Some(Intent::Take { want: 0 });
        }
        let stale = match reported {
            // This leader never reported here (it took the lead, or forgot the key): once.
            None => self.demand > 0,
            Some(last) => {
                let since = now_us.saturating_sub(last.at_us);
                let changed = self.demand.abs_diff(last.demand) * 10 > last.demand
                    && since >= 2 * self.tick_us;
                changed || (since >= self.report_every_us && counts.unspent() > 0)
            }
        };
        stale.then_some(Intent::Take { want: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: f64 = 1e6;

    /// 100 units a second in a window of 60 s, a horizon of 1.2 s, a tick of 0.1 s.
    fn pace() -> Pace {
        let rate = 100.0 / SECOND;
        Pace {
            rate,
            demand: 6_000,
            quota: 10_000,
            margin: rate * 0.2 * SECOND,
            horizon_us: 1.2 * SECOND,
            tick_us: 100_000,
            report_every_us: 500_000,
        }
    }

    fn counts(held: u64, spent: u64) -> Counts {
        Counts {
            held,
            spent,
            asked: 0,
        }
    }

    fn reported(demand: u64, at_us: u64) -> Option<Report> {
        Some(Report { demand, at_us })
    }

    #[test]
    fn a_region_takes_a_horizon_ahead_not_the_whole_window() {
        let pace = pace();
        // 30 s left at 100 a second: 120 units (1.2 s) and the margin, not 3 000.
        assert_eq!(
            pace.plan(counts(0, 0), 30.0 * SECOND, None, 0),
            Some(Intent::Take { want: 140 })
        );
        // Holding 120 unspent (more than three quarters of a horizon's 90 and the margin):
        // nothing to do.
        assert_eq!(
            pace.plan(counts(500, 380), 30.0 * SECOND, reported(6_000, 0), 0),
            None
        );
        // Below it: the rest of a horizon.
        assert_eq!(
            pace.plan(counts(500, 400), 30.0 * SECOND, reported(6_000, 0), 0),
            Some(Intent::Take { want: 40 })
        );
        // Within a horizon of the end, whatever the rest of the window needs.
        assert_eq!(
            pace.plan(counts(500, 450), 1.0 * SECOND, reported(6_000, 0), 0),
            Some(Intent::Take { want: 70 })
        );
        // Never beyond the quota.
        assert_eq!(
            pace.plan(counts(9_990, 9_990), 30.0 * SECOND, reported(6_000, 0), 0),
            Some(Intent::Take { want: 10 })
        );
    }

    #[test]
    fn what_is_held_beyond_two_horizons_is_given_back() {
        let pace = pace();
        // 2.4 s at 100 a second and two margins: 280 kept of 1 000 unspent.
        assert_eq!(
            pace.plan(counts(1_000, 0), 30.0 * SECOND, reported(6_000, 0), 0),
            Some(Intent::Surrender { most: 720 })
        );
        // A surplus smaller than a fiftieth of the quota is not worth a move.
        assert_eq!(
            pace.plan(counts(470, 0), 30.0 * SECOND, reported(6_000, 0), 0),
            None
        );
    }

    #[test]
    fn demand_is_reported_again_when_it_changes_or_while_units_are_held() {
        let pace = pace();
        let holding = counts(200, 0);
        // Reported 0.2 s ago, within a tenth: nothing.
        assert_eq!(
            pace.plan(holding, 30.0 * SECOND, reported(5_500, 0), 200_000),
            None
        );
        // More than a tenth off: reported again, once two ticks have passed.
        assert_eq!(
            pace.plan(holding, 30.0 * SECOND, reported(5_000, 0), 100_000),
            None
        );
        assert_eq!(
            pace.plan(holding, 30.0 * SECOND, reported(5_000, 0), 200_000),
            Some(Intent::Take { want: 0 })
        );
        // Unchanged, but units held for half a second: reported, to hear who waits for them.
        assert_eq!(
            pace.plan(holding, 30.0 * SECOND, reported(6_000, 0), 500_000),
            Some(Intent::Take { want: 0 })
        );
        // Unchanged and nothing unspent (the whole quota spent): nothing anyone could wait for.
        assert_eq!(
            pace.plan(
                counts(10_000, 10_000),
                30.0 * SECOND,
                reported(6_000, 0),
                500_000
            ),
            None
        );
        // Never reported by this leader: once.
        assert_eq!(
            pace.plan(holding, 30.0 * SECOND, None, 0),
            Some(Intent::Take { want: 0 })
        );
    }

    #[test]
    fn a_demand_gone_is_reported_as_zero_where_it_was_reported() {
        let gone = Pace {
            rate: 0.0,
            demand: 0,
            margin: 0.0,
            ..pace()
        };
        assert_eq!(
            gone.plan(counts(10, 10), 30.0 * SECOND, reported(6_000, 0), 0),
            Some(Intent::Take { want: 0 })
        );
        assert_eq!(gone.plan(counts(10, 10), 30.0 * SECOND, None, 0), None);
    }
}
