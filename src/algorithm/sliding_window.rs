//! Sliding window counter, as `lua/sliding_window.lua` (sub-intervals and a weighted trailing
//! window; `n = 1` is Cloudflare's weighted previous window).
//!
//! The period is split into `n` sub-intervals of `size` µs, aligned to the epoch: sub-interval
//! `i` covers `[i * size, (i + 1) * size)`. At time `now`, in sub-interval `current` at `offset`
//! µs into it, the window `(now - period, now]` holds sub-intervals `current - n + 1 ..= current`
//! entirely and the trailing sub-interval `current - n` for its last `size - offset` µs, so
//!
//! ```text
//! used = sum(count[current - n + 1 ..= current]) + ceil(count[current - n] * weight)
//! ```
//!
//! The weight is `(steps - elapsed) / steps`: the offset measured in steps of `quantum` µs,
//! `quantum` being the smallest that keeps `limit * steps` within 2^52 (1 µs unless `limit *
//! size` passes 2^52), so every product below is an exact integer below 2^53, in the script's
//! doubles as here (but for counts far above the limit, see `weighted`). Rounding the weighted
//! count up, and the elapsed steps down, never lets the estimate admit more than the exact weight
//! would; with whole units, `used + cost <= limit` is then the exact rational comparison.
//!
//! A clock behind the newest counted sub-interval (it went back) is taken to be at that
//! sub-interval's start: the estimate is then at its highest, and no count ever lies ahead.
//! Unless the newest lies more than `n` sub-intervals (a period) ahead: no count of this rule
//! matters that long, so the counts are foreign (another rule's, or from before a clock step back
//! by more than a period) and honouring them would deny for as long as they lie ahead. They then
//! count as nothing and the next admission replaces them, so no reported wait or TTL exceeds two
//! periods and a sub-interval.

use super::arith::{ceil_div, ceil_div_product, floor_div};
use super::{Outcome, Params, Step, Write, verdict};

/// `limit * steps` stays within this, so weighted counts are exact in the script's doubles (and the
/// rounding corrections of its `floor_div`/`ceil_div` stay below 2^53) as in an `i64`.
const WEIGHT_RANGE: i64 = 1 << 52;

/// The counts of sub-intervals `newest - n ..= newest`, in a ring of `n + 1` slots indexed by
/// sub-interval modulo `n + 1`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct State {
    /// The newest sub-interval that has a count.
    newest: i64,
    counts: Box<[u32]>,
}

impl State {
    /// The counts as a step reads them.
    fn ring(&self) -> Ring<'_> {
        Ring {
            newest: self.newest,
            newest_slot: slot(self.newest, self.counts.len()),
            counts: &self.counts,
        }
    }

    #[cfg(test)]
    fn count(&self, index: i64) -> i64 {
        self.ring().count(index)
    }
}

/// A state's counts with the newest sub-interval's slot found once, so that reading any
/// sub-interval takes no division (a step reads up to `n + 2` of them).
#[derive(Clone, Copy)]
struct Ring<'a> {
    newest: i64,
    newest_slot: usize,
    counts: &'a [u32],
}

impl Ring<'_> {
    /// The count of sub-interval `index`: 0 unless it lies in the ring.
    fn count(&self, index: i64) -> i64 {
        match usize::try_from(self.newest - index) {
            Ok(behind) if behind < self.counts.len() => {
                i64::from(self.counts[self.slot_behind(behind)])
            }
            _ => 0,
        }
    }

    /// The counts of sub-intervals `from ..= to` added up (the script adds up every count in
    /// that range it holds; integers, so in any order).
    fn sum(&self, from: i64, to: i64) -> i64 {
        let slots = self.counts.len();
        let from = from.max(self.newest - slots as i64 + 1);
        let to = to.min(self.newest);
        if from > to {
            return 0;
        }
        // Up to `slots` sub-intervals, from `first` on, wrapping around the end of the ring.
        let len = (to - from) as usize + 1;
        let first = self.slot_behind((self.newest - from) as usize);
        let (head, wrapped) = if first + len <= slots {
            (&self.counts[first..first + len], &[][..])
        } else {
            (&self.counts[first..], &self.counts[..first + len - slots])
        };
        let add = |counts: &[u32]| counts.iter().map(|&count| i64::from(count)).sum::<i64>();
        add(head) + add(wrapped)
    }

    /// The slot of the sub-interval `behind` (less than the ring's length) before the newest.
    fn slot_behind(&self, behind: usize) -> usize {
        if behind <= self.newest_slot {
            self.newest_slot - behind
        } else {
            self.newest_slot + self.counts.len() - behind
        }
    }
}

fn slot(index: i64, slots: usize) -> usize {
    // Sub-interval indexes are integers below 2^53; those before the epoch's first period are
    // negative (a trailing sub-interval near the epoch) and take their own slot too.
    index.rem_euclid(slots as i64) as usize
}

/// An admitted request: `cost` more units in sub-interval `index`, in place of every count when
/// the counts were foreign (`replace`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Add {
    index: i64,
    cost: u32,
    replace: bool,
    slots: usize,
}

impl Add {
    pub(super) fn apply(self, window: &mut State) {
        let slots = window.counts.len();
        if self.replace {
            window.counts.fill(0);
            window.newest = self.index;
        }
        if slots != self.slots {
            // Another ring size (cannot happen: the sub-intervals are part of the storage key).
            *window = self.into_window();
            return;
        }
        if self.index > window.newest {
            let gap = self.index - window.newest;
            if gap >= slots as i64 {
                window.counts.fill(0);
            } else {
                // The sub-intervals between the newest and this one had no requests.
                let mut at = slot(window.newest, slots);
                for _ in 0..gap {
                    at = if at + 1 == slots { 0 } else { at + 1 };
                    window.counts[at] = 0;
                }
            }
            window.newest = self.index;
        }
        // A step evaluates at the newest sub-interval or later (or replaces foreign counts), so
        // `index` lies in the ring.
        let count = &mut window.counts[slot(self.index, slots)];
        *count = count.saturating_add(self.cost);
    }

    pub(super) fn into_window(self) -> State {
        let mut window = State {
            newest: self.index,
            counts: vec![0; self.slots].into_boxed_slice(),
        };
        self.apply(&mut window);
        window
    }
}

/// A rule's sub-intervals: `size` µs each, measured in `steps` of `quantum` µs. The script works
/// it out on every call; it depends on the rule alone, so here it is worked out once, when the
/// policy is built (see `Params`), by the same operations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Geometry {
    size: i64,
    quantum: i64,
    steps: i64,
}

impl Geometry {
    /// The geometry of `n` sub-intervals of `period` µs (which they divide), counting up to
    /// `limit`.
    pub(super) fn new(limit: i64, period: i64, n: i64) -> Self {
        let size = period / n;
        let quantum = ceil_div(size, floor_div(WEIGHT_RANGE, limit));
        let steps = ceil_div(size, quantum);
        Geometry {
            size,
            quantum,
            steps,
        }
    }
}

pub(super) fn step(params: &Params, state: Option<&State>, now: i64, cost: i64) -> Step {
    let Params {
        limit,
        extra: n,
        window: Geometry {
            size,
            quantum,
            steps,
        },
        ..
    } = *params;

    let mut current = floor_div(now, size);
    let mut offset = now - current * size;
    let foreign = state.is_some_and(|state| state.newest > current + n);
    let state = state.filter(|_| !foreign);
    let ring = state.map(State::ring);
    let count = |index: i64| ring.map_or(0, |ring| ring.count(index));
    let newest = state.map(|state| state.newest);
    if let Some(newest) = newest
        && newest > current
    {
        current = newest;
        offset = 0;
    }
    // The script adds up every count it holds above `current - n`, none lying above `current`.
    let full = ring.map_or(0, |ring| ring.sum(current - n + 1, current));
    let trailing = count(current - n);
    let elapsed = floor_div(offset, quantum);
    let used = full + weighted(trailing, steps - elapsed, steps);
    // The full limit is back once the newest counted sub-interval has slid out entirely.
    let mut reset_after = match newest {
        Some(newest) if newest >= current - n => (newest + n + 1) * size - now,
        _ => 0,
    };

    let room = (limit - used).max(0);
    if cost > limit {
        return Step::read_only(verdict(Outcome::Never, room, used, reset_after, 0));
    }
    if used + cost > limit {
        let window = Window {
            limit,
            n,
            size,
            quantum,
            steps,
        };
        let retry_after = window.fits_at(current, elapsed, full, trailing, cost, count) - now;
        let denied = verdict(Outcome::Denied, room, used, reset_after, retry_after);
        return Step::read_only(denied);
    }
    let used = used + cost;
    let mut write = None;
    if cost > 0 {
        reset_after = (current + n + 1) * size - now;
        write = Some(Write::Window(Add {
            index: current,
            // At most the limit, a u32.
            cost: cost as u32,
            replace: foreign,
            slots: n as usize + 1,
        }));
    }
    let allowed = verdict(Outcome::Allowed, limit - used, used, reset_after, 0);
    Step::new(allowed, write, allowed.reset_after_us)
}

/// The trailing sub-interval's `count` weighted by `left / steps`, rounded up:
/// `ceil_div(count * left, steps)` as the script computes it. The product is at most
/// `limit * steps` (within 2^52) while the count is within the limit; a count above a limit
/// lowered while the state was live can take it past 2^53 (and an `i64`), where the script's
/// product rounds: [`ceil_div_product`] then follows the script's doubles.
fn weighted(count: i64, left: i64, steps: i64) -> i64 {
    ceil_div_product(count, left, steps)
}

/// The window's geometry, for the search of the earliest admission time.
struct Window {
    limit: i64,
    n: i64,
    size: i64,
    quantum: i64,
    steps: i64,
}

impl Window {
    /// The earliest time (µs since the epoch) at which a request of `cost` fits, if nothing else
    /// is admitted meanwhile. The estimate only falls as time passes: within a sub-interval the
    /// trailing weight shrinks step by step, and at a boundary the oldest full sub-interval
    /// becomes the trailing one at weight 1, so the estimate is continuous there. Each
    /// sub-interval from `current` on is tried in turn; by `current + n + 1` every count has left.
    fn fits_at(
        &self,
        current: i64,
        elapsed: i64,
        mut full: i64,
        mut trailing: i64,
        cost: i64,
        count: impl Fn(i64) -> i64,
    ) -> i64 {
        let Window {
            limit,
            n,
            size,
            quantum,
            steps,
        } = *self;
        let mut ahead = 0;
        while ahead <= n + 1 {
            let fit = limit - cost - full;
            if fit >= 0 {
                // trailing * (steps - at) <= fit * steps, for the smallest whole step `at`. With
                // `0 <= fit <= limit`, `fit * steps` is within 2^52.
                let mut at = 0;
                if trailing > 0 {
                    at = (steps - floor_div(fit * steps, trailing)).max(0);
                }
                if ahead == 0 {
                    at = at.max(elapsed);
                }
                if at < steps {
                    return (current + ahead) * size + at * quantum;
                }
            }
            ahead += 1;
            trailing = count(current + ahead - n);
            full -= trailing;
        }
        // Unreachable: past the last sub-interval nothing is counted and `cost <= limit`.
        (current + n + 1) * size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{OneKey, SECOND, T0};
    use crate::algorithm::{Algorithm, State as RuleState};
    use crate::quota::Quota;

    /// A key under a sliding window of `quota` in `sub_intervals`.
    fn counter(quota: Quota, sub_intervals: u16) -> OneKey {
        OneKey::new(Algorithm::SlidingWindow { sub_intervals }, quota)
    }

    /// The counts the key's window holds.
    fn window(key: &OneKey) -> &State {
        match &key.state {
            Some(RuleState::SlidingWindow(window)) => window,
            other => panic!("expected a sliding window, got {other:?}"),
        }
    }

    /// A key whose window holds what `add` leaves.
    fn holding(add: Add) -> Option<RuleState> {
        Some(Write::Window(add).into_state())
    }

    #[test]
    fn one_sub_interval_weighs_the_previous_window_by_its_overlap() {
        // Cloudflare's example: 10 per minute.
        let mut counter = counter(Quota::per_minute(10), 1);
        assert_eq!(counter.request(T0, 8).outcome, Outcome::Allowed);
        // 15 s into the next minute, 3/4 of the previous one still overlaps: ceil(8 * 0.75) = 6.
        let now = T0 + 75 * SECOND;
        let peek = counter.request(now, 0);
        assert_eq!((peek.used, peek.remaining), (6, 4));
        assert_eq!(counter.request(now, 4).outcome, Outcome::Allowed);
        let denied = counter.request(now, 1);
        assert_eq!(denied.outcome, Outcome::Denied);
        // 4 in this minute and 1 to spare: 8 * weight <= 5 once only 5/8 of the previous minute
        // overlaps, 22.5 s into this one: 7.5 s from now.
        assert_eq!(denied.retry_after_us, 7_500_000);
        assert_eq!(counter.request(now + 7_499_999, 1).outcome, Outcome::Denied);
        assert_eq!(
            counter.request(now + 7_500_000, 1).outcome,
            Outcome::Allowed
        );
    }

    #[test]
    fn sub_intervals_slide_out_one_by_one() {
        // 4 per second in 4 sub-intervals of 250 ms.
        let mut counter = counter(Quota::per_second(4), 4);
        for quarter in 0..4 {
            let now = T0 + i64::from(quarter) * 250_000;
            assert_eq!(counter.request(now, 1).outcome, Outcome::Allowed);
        }
        let now = T0 + 900_000;
        let denied = counter.request(now, 1);
        assert_eq!((denied.used, denied.remaining), (4, 0));
        // At T0 + 1 s the first quarter becomes the trailing one at weight 1; it weighs
        // ceil(1 * (250_000 - r) / 250_000), which is 0 only at r = 250_000: at T0 + 1.25 s.
        assert_eq!(denied.retry_after_us, 350_000);
        assert_eq!(denied.reset_after_us, 2_000_000 - 900_000);
        let cost_two = counter.request(now, 2);
        assert_eq!(cost_two.retry_after_us, 600_000);
    }

    #[test]
    fn costs_beyond_the_limit_never_pass_and_peeks_write_nothing() {
        let mut counter = counter(Quota::per_second(4), 2);
        let never = counter.request(T0, 5);
        assert_eq!((never.outcome, never.retry_after_us), (Outcome::Never, 0));
        counter.assert_peek_writes_nothing(4);
    }

    #[test]
    fn a_billion_a_day_uses_coarser_exact_steps() {
        let mut counter = counter(Quota::per_day(1_000_000_000), 1);
        let params = counter.params;
        let Geometry {
            size,
            quantum,
            steps,
        } = params.window;
        assert_eq!((size, quantum, steps), (params.period, 19_185, 4_503_519));
        assert!(params.limit * steps <= WEIGHT_RANGE);
        assert_eq!(counter.request(T0, 1_000_000_000).outcome, Outcome::Allowed);
        // Half a day into the next day, half still counts, and a step of 19_185 µs more: the
        // elapsed time is rounded down to 2_251_759 steps of 4_503_519, so the estimate is
        // ceil(10^9 * 2_251_760 / 4_503_519), 112 above the exact half, never below it.
        let half = counter.request(T0 + 3 * 86_400 * SECOND / 2, 0);
        assert_eq!(half.used, 500_000_112);
    }

    #[test]
    fn counts_far_above_a_lowered_limit_are_weighted_as_the_scripts_doubles_do() {
        // 4e9 counted a day ago under a far higher limit, read by 10^5 a day: 10^5 * 86_400 s is
        // past 2^52 µs, so the steps are of 2 µs, 4.32e10 of them, and the trailing count times
        // the steps left passes 2^53 (and an i64). The script's product rounds there.
        let mut counter = counter(Quota::per_day(100_000), 1);
        let Geometry {
            size,
            quantum,
            steps,
        } = counter.params.window;
        assert_eq!((quantum, steps), (2, 43_200_000_000));
        counter.state = holding(Add {
            index: T0 / size,
            cost: 4_000_000_000,
            replace: false,
            slots: 2,
        });
        // A third of a day into the next: two thirds of the steps are left.
        let now = T0 + size + size / 3;
        let left = steps - floor_div(size / 3, quantum);
        assert!(4_000_000_000_i64.checked_mul(left).is_none());
        // `ceil_div(trailing * left, steps)` in lua/common.lua, on doubles.
        let (product, steps) = (4e9 * left as f64, steps as f64);
        let mut expected = (product / steps).ceil();
        if expected > 0.0 && (expected - 1.0) * steps >= product {
            expected -= 1.0;
        } else if expected * steps < product {
            expected += 1.0;
        }
        let peek = counter.request(now, 0);
        assert_eq!(
            (peek.outcome, peek.used, peek.remaining),
            (Outcome::Denied, expected as u64, 0)
        );
        assert_eq!(peek.used, 2_666_666_667);
    }

    #[test]
    fn a_clock_behind_the_counts_evaluates_at_the_newest_sub_interval() {
        let mut counter = counter(Quota::per_second(2), 2);
        counter.request(T0 + SECOND, 1);
        let behind = counter.request(T0, 1);
        assert_eq!(behind.outcome, Outcome::Allowed);
        assert_eq!(behind.reset_after_us, 2_500_000);
        let state = window(&counter);
        assert_eq!(state.count(state.newest), 2);
    }

    #[test]
    fn counts_more_than_a_period_ahead_are_foreign_and_replaced() {
        // 5 per hour in 60 sub-intervals of a minute, holding what 3 per minute in sub-intervals
        // of a second left: 3 in the second-index of T0, which as a minute-index lies ~1.7e9
        // minutes ahead.
        let mut counter = counter(Quota::per_hour(5), 60);
        let seconds = T0 / SECOND;
        counter.state = holding(Add {
            index: seconds,
            cost: 3,
            replace: false,
            slots: 61,
        });
        let allowed = counter.request(T0 + SECOND, 2);
        assert_eq!(
            (allowed.outcome, allowed.remaining, allowed.used),
            (Outcome::Allowed, 3, 2)
        );
        // 61 minutes from the start of the current one, not ~1e17 µs.
        assert_eq!(allowed.reset_after_us, 61 * 60 * 1_000_000 - 1_000_000);
        let state = window(&counter);
        assert_eq!(state.newest, floor_div(T0 + SECOND, 60 * SECOND));
        assert_eq!(
            state.counts.iter().sum::<u32>(),
            2,
            "nothing foreign is kept"
        );
    }

    #[test]
    fn no_wait_exceeds_two_periods_and_a_sub_interval_whatever_lies_ahead() {
        // 2 per second in 4 sub-intervals of 250 ms, full in a sub-interval `ahead` of now.
        let size = 250_000;
        for ahead in 0..=12 {
            let mut counter = counter(Quota::per_second(2), 4);
            counter.request(T0 + i64::from(ahead) * size, 2);
            for verdict in [counter.request(T0, 1), counter.request(T0, 0)] {
                assert!(
                    verdict.reset_after_us <= 9 * 250_000,
                    "{ahead}: {verdict:?}"
                );
                assert!(
                    verdict.retry_after_us <= 9 * 250_000,
                    "{ahead}: {verdict:?}"
                );
            }
            let step = crate::algorithm::step(&counter.params, counter.state.as_ref(), T0, 1);
            if let Some((_, ttl)) = step.write {
                assert!(ttl <= 9 * 250_000, "{ahead}: TTL {ttl}");
            }
        }
    }

    #[test]
    fn ring_sums_add_up_the_counts_in_range_wherever_the_ring_wraps() {
        for slots in [1, 2, 5, 61] {
            for newest in [0, 3, 59, 60, 61, 1_000_003] {
                let mut window = Add {
                    index: newest - slots as i64 + 1,
                    cost: 1,
                    replace: false,
                    slots,
                }
                .into_window();
                for (step, index) in (newest - slots as i64 + 2..=newest).enumerate() {
                    Add {
                        index,
                        cost: step as u32 + 2,
                        replace: false,
                        slots,
                    }
                    .apply(&mut window);
                }
                let ring = window.ring();
                for index in newest - 70..=newest + 2 {
                    let live = index > newest - slots as i64 && index <= newest;
                    let expected = if live {
                        i64::from(window.counts[index.rem_euclid(slots as i64) as usize])
                    } else {
                        0
                    };
                    assert_eq!(ring.count(index), expected, "{slots} {newest} {index}");
                }
                for from in newest - 70..=newest + 2 {
                    for to in from - 1..=newest + 2 {
                        let one_by_one: i64 = (from..=to).map(|index| ring.count(index)).sum();
                        assert_eq!(
                            ring.sum(from, to),
                            one_by_one,
                            "{slots} {newest} {from} {to}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_ring_forgets_sub_intervals_that_slid_out() {
        let mut counter = counter(Quota::per_second(10), 2);
        counter.request(T0, 3);
        counter.request(T0 + 500_000, 2);
        counter.request(T0 + 1_500_000, 1);
        let state = window(&counter);
        assert_eq!(state.count(state.newest), 1);
        assert_eq!(state.count(state.newest - 1), 0);
        assert_eq!(state.count(state.newest - 2), 2);
        assert_eq!(state.count(state.newest - 3), 0, "out of the ring");
    }
}
