//! GCRA, as `lua/gcra.lua`: requests spaced `period / limit` apart on average, up to `burst` back
//! to back. Kept in its exact bucket-level form: the theoretical arrival time is
//! `since + level / limit`. Its step is the bucket meter's ([`bucket::step`]).

use super::bucket;

/// The level (units of 1/period request) at time `since` (µs since the epoch, never moved back).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct State {
    pub(crate) since: i64,
    pub(crate) level: i64,
}

impl bucket::Stored for State {
    #[inline(always)]
    fn level(&self, _capacity: i64) -> (i64, i64) {
        (self.level, self.since)
    }

    #[inline(always)]
    fn store(since: i64, level: i64, _capacity: i64) -> super::State {
        super::State::Gcra(State { since, level })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::bucket;
    use crate::algorithm::testing::{OneKey, SECOND, T0};
    use crate::algorithm::{Algorithm, Outcome, Params, RuleVerdict, Step, Write};
    use crate::quota::Quota;

    /// A GCRA rule's step.
    fn step(params: &Params, state: Option<&State>, now: i64, cost: i64) -> Step {
        bucket::step(params, state, now, cost)
    }

    fn params(quota: Quota) -> Params {
        crate::algorithm::testing::params(Algorithm::Gcra, quota)
    }

    /// The state an admitted step writes.
    fn written(step: Step) -> State {
        match step.write {
            Some((Write::Set(super::super::State::Gcra(state)), _)) => state,
            other => panic!("expected a GCRA state, got {other:?}"),
        }
    }

    /// Runs requests of cost 1 at the given times, returning each verdict.
    fn run(params: Params, times: &[i64]) -> Vec<RuleVerdict> {
        let mut key = OneKey {
            params,
            state: None,
        };
        times.iter().map(|&now| key.request(now, 1)).collect()
    }

    #[test]
    fn a_burst_passes_back_to_back_then_requests_are_spaced() {
        // 3 per 10 s, burst 3: the quickstart's /api/key.
        let p = params(Quota::new(3, std::time::Duration::from_secs(10)));
        let verdicts = run(p, &[T0, T0, T0, T0]);
        let outcomes: Vec<_> = verdicts.iter().map(|v| v.outcome).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Allowed,
                Outcome::Allowed,
                Outcome::Allowed,
                Outcome::Denied
            ]
        );
        assert_eq!(
            verdicts.iter().map(|v| v.remaining).collect::<Vec<_>>(),
            [2, 1, 0, 0]
        );
        // One request drains every 10/3 s: 3_333_333.33 µs, rounded up.
        assert_eq!(verdicts[3].retry_after_us, 3_333_334);
        assert_eq!(verdicts[2].full_after_us, 10_000_000);
    }

    #[test]
    fn waiting_exactly_retry_after_is_enough_and_a_microsecond_less_is_not() {
        let p = params(Quota::new(3, std::time::Duration::from_secs(10)));
        let state = written(step(&p, None, T0, 3));
        let denied = step(&p, Some(&state), T0, 1).verdict;
        let wait = denied.retry_after_us as i64;
        assert_eq!(
            step(&p, Some(&state), T0 + wait - 1, 1).verdict.outcome,
            Outcome::Denied
        );
        assert_eq!(
            step(&p, Some(&state), T0 + wait, 1).verdict.outcome,
            Outcome::Allowed
        );
    }

    #[test]
    fn a_clock_going_back_and_forth_refunds_nothing() {
        // Burst 4 at 2 per second, requests at T+10 s and T+9 s in turn: time never runs back
        // for the bucket, so the second behind is not drained again when the clock comes back.
        let p = params(Quota::per_second(2).with_burst(4));
        let times: Vec<i64> = (0..40)
            .map(|i| T0 + if i % 2 == 0 { 10 } else { 9 } * SECOND)
            .collect();
        let verdicts = run(p, &times);
        let admitted = verdicts
            .iter()
            .filter(|v| v.outcome == Outcome::Allowed)
            .count();
        assert_eq!(admitted, 4);
        // Behind the bucket's time by a second: its wait counts from now.
        assert_eq!(verdicts[3].full_after_us, 3_000_000);
        assert_eq!(
            (verdicts[5].outcome, verdicts[5].retry_after_us),
            (Outcome::Denied, 1_500_000)
        );
    }

    #[test]
    fn the_bucket_time_never_moves_back() {
        let p = params(Quota::per_second(2).with_burst(4));
        let state = written(step(&p, None, T0 + SECOND, 2));
        let behind = step(&p, Some(&state), T0, 1);
        assert_eq!((behind.verdict.remaining, behind.verdict.used), (1, 3));
        // Three requests drain in 1.5 s from the bucket's time, a second ahead.
        assert_eq!(behind.verdict.full_after_us, 2_500_000);
        assert_eq!(
            written(behind),
            State {
                since: T0 + SECOND,
                level: 3 * p.period
            }
        );
    }

    #[test]
    fn a_bucket_time_further_ahead_than_a_full_bucket_drains_is_foreign() {
        // Burst 4 at 2 per second: a full bucket drains in 2 s.
        let p = params(Quota::per_second(2).with_burst(4));
        let full = State {
            since: T0 + 2 * SECOND,
            level: 4 * p.period,
        };
        let behind = step(&p, Some(&full), T0, 1).verdict;
        assert_eq!(
            (behind.outcome, behind.full_after_us, behind.retry_after_us),
            (Outcome::Denied, 4_000_000, 2_500_000)
        );
        // A µs further ahead, or the year 2255 (the audit's ~1e17 µs): an empty bucket, now.
        for since in [T0 + 2 * SECOND + 1, 9_007_199_254_740_991] {
            let foreign = step(&p, Some(&State { since, ..full }), T0, 1);
            assert_eq!(
                (foreign.verdict.outcome, foreign.verdict.used),
                (Outcome::Allowed, 1)
            );
            assert_eq!(foreign.verdict.full_after_us, 500_000);
            assert_eq!(
                written(foreign),
                State {
                    since: T0,
                    level: p.period
                }
            );
        }
    }

    #[test]
    fn a_wait_past_2_pow_53_is_reported_as_the_scripts_double_rounds_it() {
        // 1 per 3 s (1 unit drains per µs) with the largest burst that stays exact: a full bucket
        // holds 9_007_199_253_000_000 units, 1_740_992 below 2^53, and takes that many µs to
        // drain. Two seconds ahead of now, its reset is past 2^53, where doubles step by 2.
        let period = std::time::Duration::from_secs(3);
        let p = params(Quota::new(1, period).with_burst(3_002_399_751));
        assert_eq!((p.limit, p.period), (1, 3_000_000));
        let lead = 2 * SECOND + 1;
        let full = State {
            since: T0 + lead,
            level: 3_002_399_751 * p.period,
        };
        let peek = step(&p, Some(&full), T0, 0).verdict;
        let exact = full.level + lead;
        assert!(exact > 1 << 53 && exact % 2 == 1);
        // What the script's `us + lead` gives: the exact sum rounded to a double.
        assert_eq!(peek.full_after_us, (full.level as f64 + lead as f64) as u64);
        assert_eq!(peek.full_after_us.abs_diff(exact as u64), 1);
    }

    #[test]
    fn cost_above_burst_can_never_pass_and_cost_zero_only_peeks() {
        let mut key = OneKey::new(Algorithm::Gcra, Quota::per_second(10).with_burst(5));
        assert_eq!(key.request(T0, 6).outcome, Outcome::Never);
        key.assert_peek_writes_nothing(5);
    }
}
