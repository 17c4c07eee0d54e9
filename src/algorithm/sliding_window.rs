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
    let mut full_after = match newest {
        Some(newest) if newest >= current - n => (newest + n + 1) * size - now,
        _ => 0,
    };

    let room = (limit - used).max(0);
    if cost > limit {
        return Step::read_only(verdict(Outcome::Never, room, used, full_after, 0));
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
        let denied = verdict(Outcome::Denied, room, used, full_after, retry_after);
        return Step::read_only(denied);
    }
    let used = used + cost;
    let mut write = None;
    if cost > 0 {
        full_after = (current + n + 1) * size - now;
        write = Some(Write::Window(Add {
            index: current,
            // At most the limit, a u32.
            cost: cost as u32,
            replace: foreign,
            slots: n as usize + 1,
        }));
    }
    let allowed = verdict(Outcome::Allowed, limit - used, used, full_after, 0);
    Step::new(allowed, write, allowed.full_after_us)
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
mod tests;
