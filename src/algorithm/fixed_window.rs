//! Fixed window, as `lua/fixed_window.lua`: at most `limit` units of cost per window; a window
//! starts with the first request a key makes after its previous window ended.
//!
//! A start ahead of now (the clock went back) is still that window, unless it lies more than a
//! period ahead: no window of this rule starts that late, so the state is foreign (another rule's,
//! or from before a clock step back by more than a period) and honouring it would deny for as long
//! as it lies ahead; a window starts now instead. So no reported wait or TTL exceeds two periods.

use super::{Outcome, Params, Step, Write, verdict};

/// The window's start (µs since the epoch) and the units used in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct State {
    pub(crate) start: i64,
    pub(crate) used: i64,
}

#[inline(always)]
pub(super) fn step(params: &Params, state: Option<&State>, now: i64, cost: i64) -> Step {
    let Params { limit, period, .. } = *params;
    let (start, used) = match state {
        Some(state) if now < state.start + period && state.start - now <= period => {
            (state.start, state.used)
        }
        _ => (now, 0),
    };
    let full_after = start + period - now;
    let room = (limit - used).max(0);
    if cost > limit {
        let never = verdict(Outcome::Never, room, used, full_after, 0);
        return Step::read_only(never);
    }
    if used + cost > limit {
        let denied = verdict(Outcome::Denied, room, used, full_after, full_after);
        return Step::read_only(denied);
    }
    let used = used + cost;
    let write = (cost > 0).then_some(Write::Set(super::State::FixedWindow(State { start, used })));
    let allowed = verdict(Outcome::Allowed, limit - used, used, full_after, 0);
    Step::new(allowed, write, allowed.full_after_us)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::algorithm::Algorithm;
    use crate::algorithm::testing::{SECOND, T0, params};
    use crate::quota::Quota;

    #[test]
    fn a_window_starting_more_than_a_period_ahead_is_foreign() {
        // 5 per 10 s, all used in a window starting at T0 + 20 s.
        let params = params(
            Algorithm::FixedWindow,
            Quota::new(5, Duration::from_secs(10)),
        );
        let state = State {
            start: T0 + 20 * SECOND,
            used: 5,
        };
        // A period behind its start, it is still that window: two periods to its end.
        let behind = step(&params, Some(&state), T0 + 10 * SECOND, 1).verdict;
        assert_eq!(
            (behind.outcome, behind.retry_after_us),
            (Outcome::Denied, 20_000_000)
        );
        // Further behind no window of this rule starts that late: one starts now.
        let foreign = step(&params, Some(&state), T0, 1);
        assert_eq!(
            (foreign.verdict.outcome, foreign.verdict.used),
            (Outcome::Allowed, 1)
        );
        assert_eq!(foreign.verdict.full_after_us, 10_000_000);
        assert_eq!(
            foreign.write,
            Some((
                Write::Set(super::super::State::FixedWindow(State {
                    start: T0,
                    used: 1
                })),
                10_000_000
            ))
        );
    }
}
