//! Sliding log, as `lua/sliding_log.lua`: the time of every admitted unit, at most `limit` units
//! in any `period`.
//!
//! An entry at time `t` counts while `now - period < t`, and leaves the window at `t + period`.
//! The deque mirrors the Redis sorted set: ascending times, entries at or before the window's
//! start dropped when the key is next written, so it never holds more than `limit` entries.
//!
//! Entries ahead of now (the clock went back) count, unless the newest lies more than a period
//! ahead: no entry of this rule can matter that long, so the log is foreign (another rule's, or
//! from before a clock step back by more than a period) and honouring it would deny for as long as
//! it lies ahead. It then counts as empty and the next admission replaces it, so no reported wait
//! or TTL exceeds two periods.

use std::collections::VecDeque;

use super::{Outcome, Params, Step, Write, verdict};

/// The times (µs since the epoch) of the admitted units, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct State {
    times: VecDeque<i64>,
}

impl State {
    /// How many entries the log holds (in or out of the window).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.times.len()
    }
}

/// An admitted request: `cost` entries at `now`, after dropping entries at or before `cutoff`,
/// or every entry when the log was foreign (`replace`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Append {
    cutoff: i64,
    now: i64,
    // At most `Algorithm::SLIDING_LOG_MAX_LIMIT`; a u32 next to the flag keeps a `Write` small.
    cost: u32,
    replace: bool,
}

impl Append {
    pub(super) fn apply(self, log: &mut State) {
        let times = &mut log.times;
        if self.replace {
            times.clear();
        }
        let stale = times.partition_point(|&t| t <= self.cutoff);
        times.drain(..stale);
        // `now` is the newest time unless the clock went back: keep the deque sorted like the
        // sorted set.
        let at = times.partition_point(|&t| t <= self.now);
        if at == times.len() {
            times.extend(std::iter::repeat_n(self.now, self.cost as usize));
        } else {
            for _ in 0..self.cost {
                times.insert(at, self.now);
            }
        }
    }

    pub(super) fn into_log(self) -> State {
        let mut log = State {
            times: VecDeque::with_capacity(self.cost as usize),
        };
        self.apply(&mut log);
        log
    }
}

pub(super) fn step(params: &Params, state: Option<&State>, now: i64, cost: i64) -> Step {
    let Params { limit, period, .. } = *params;
    let cutoff = now - period;
    let empty = VecDeque::new();
    let times = state.map_or(&empty, |state| &state.times);
    let foreign = times.back().is_some_and(|&newest| newest - now > period);
    let times = if foreign { &empty } else { times };
    let first = times.partition_point(|&t| t <= cutoff);
    // At most the largest limit a log may have (10,000), however long the deque.
    let count = (times.len() - first) as i64;
    // When the newest entry leaves the window, the full limit is back.
    let mut full_after = match times.back() {
        Some(&newest) if count > 0 => newest + period - now,
        _ => 0,
    };
    // `count` exceeds `limit` only when the limit was lowered while the log was live.
    let room = (limit - count).max(0);
    if cost > limit {
        return Step::read_only(verdict(Outcome::Never, room, count, full_after, 0));
    }
    let excess = count + cost - limit;
    if excess > 0 {
        // The request fits once `excess` entries have left: the excess-th oldest is the last.
        let oldest = times[first + excess as usize - 1];
        let retry_after = oldest + period - now;
        let denied = verdict(Outcome::Denied, room, count, full_after, retry_after);
        return Step::read_only(denied);
    }
    let used = count + cost;
    let mut write = None;
    if cost > 0 {
        full_after = full_after.max(period);
        write = Some(Write::Log(Append {
            cutoff,
            now,
            cost: cost as u32,
            replace: foreign,
        }));
    }
    let allowed = verdict(Outcome::Allowed, limit - used, used, full_after, 0);
    Step::new(allowed, write, allowed.full_after_us)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::algorithm::testing::{OneKey, SECOND, T0};
    use crate::algorithm::{Algorithm, State as RuleState};
    use crate::quota::Quota;

    /// A key under a log of 3 per 10 seconds.
    fn log() -> OneKey {
        OneKey::new(
            Algorithm::SlidingLog,
            Quota::new(3, Duration::from_secs(10)),
        )
    }

    /// The times the key's log holds, oldest first.
    fn times(key: &OneKey) -> Vec<i64> {
        match &key.state {
            Some(RuleState::SlidingLog(log)) => log.times.iter().copied().collect(),
            other => panic!("expected a log, got {other:?}"),
        }
    }

    #[test]
    fn the_window_slides_entry_by_entry() {
        let mut log = log();
        assert_eq!(log.request(T0, 1).outcome, Outcome::Allowed);
        assert_eq!(log.request(T0 + 2 * SECOND, 1).outcome, Outcome::Allowed);
        assert_eq!(log.request(T0 + 4 * SECOND, 1).outcome, Outcome::Allowed);
        let denied = log.request(T0 + 5 * SECOND, 1);
        assert_eq!(denied.outcome, Outcome::Denied);
        // The entry at T0 leaves at T0 + 10 s.
        assert_eq!(denied.retry_after_us, 5_000_000);
        assert_eq!(denied.full_after_us, 9_000_000);
        // A cost of 2 needs the two oldest gone: the one at T0 + 2 s leaves at T0 + 12 s.
        let denied = log.request(T0 + 5 * SECOND, 2);
        assert_eq!(denied.retry_after_us, 7_000_000);
        // One µs early is still denied; on time is admitted.
        assert_eq!(
            log.request(T0 + 10 * SECOND - 1, 1).outcome,
            Outcome::Denied
        );
        let allowed = log.request(T0 + 10 * SECOND, 1);
        assert_eq!(allowed.outcome, Outcome::Allowed);
        assert_eq!((allowed.remaining, allowed.used), (0, 3));
        assert_eq!(allowed.full_after_us, 10_000_000);
        // The entry at T0 was dropped when writing: never more than `limit` entries.
        assert_eq!(times(&log).len(), 3);
    }

    #[test]
    fn costs_add_one_entry_per_unit_and_too_costly_requests_never_pass() {
        let mut log = log();
        let allowed = log.request(T0, 3);
        assert_eq!((allowed.outcome, allowed.remaining), (Outcome::Allowed, 0));
        assert_eq!(times(&log).len(), 3);
        let never = log.request(T0, 4);
        assert_eq!((never.outcome, never.retry_after_us), (Outcome::Never, 0));
        // All three entries leave together.
        let denied = log.request(T0 + SECOND, 1);
        assert_eq!(denied.retry_after_us, 9_000_000);
    }

    #[test]
    fn a_peek_writes_nothing_and_an_empty_log_is_reset() {
        log().assert_peek_writes_nothing(3);
    }

    #[test]
    fn a_log_whose_newest_entry_lies_more_than_a_period_ahead_is_foreign() {
        let mut log = log();
        log.request(T0 + 20 * SECOND, 3);
        // A period ahead: the entries count, and leave two periods from now.
        let behind = log.request(T0 + 10 * SECOND, 1);
        assert_eq!(
            (behind.outcome, behind.full_after_us, behind.retry_after_us),
            (Outcome::Denied, 20_000_000, 20_000_000)
        );
        // Further ahead: not this rule's; the log counts as empty and is replaced.
        let foreign = log.request(T0, 1);
        assert_eq!(
            (foreign.outcome, foreign.used, foreign.full_after_us),
            (Outcome::Allowed, 1, 10_000_000)
        );
        assert_eq!(times(&log), [T0]);
    }

    #[test]
    fn entries_from_a_clock_that_went_back_stay_sorted() {
        let mut log = log();
        log.request(T0 + SECOND, 1);
        log.request(T0, 1);
        assert_eq!(times(&log), [T0, T0 + SECOND]);
        // The newest entry (in the future) decides the reset.
        let peek = log.request(T0, 0);
        assert_eq!(peek.full_after_us, 11_000_000);
    }
}
