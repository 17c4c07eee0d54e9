//! GCRA, as `lua/gcra.lua`: requests spaced `period / limit` apart on average, up to `burst` back
//! to back. Kept in its exact bucket-level form: the theoretical arrival time is
//! `since + level / limit`.

use super::{Params, Step, Write, bucket};

/// The level (units of 1/period request) at time `since` (µs since the epoch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct State {
    pub(crate) since: f64,
    pub(crate) level: f64,
}

pub(super) fn step(params: &Params, state: Option<&State>, now: f64, cost: f64) -> Step {
    let level = state.map_or(0.0, |state| {
        bucket::drain(state.level, state.since, now, params.limit)
    });
    let (verdict, new_level) = bucket::evaluate(params, level, cost);
    let write = new_level.map(|level| Write::Set(super::State::Gcra(State { since: now, level })));
    Step::new(verdict, write, verdict.reset_after_us as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Outcome, RuleVerdict};
    use crate::{Quota, Rule};

    const SECOND: f64 = 1_000_000.0;

    fn params(quota: Quota) -> Params {
        Params::new(&Rule::gcra("t", quota)).unwrap()
    }

    /// The state an admitted step writes.
    fn written(step: Step) -> State {
        match step.write {
            Some((Write::Set(super::super::State::Gcra(state)), _)) => state,
            other => panic!("expected a GCRA state, got {other:?}"),
        }
    }

    /// Runs requests of cost 1 at the given times, returning each verdict.
    fn run(params: &Params, times: &[f64]) -> Vec<RuleVerdict> {
        let mut state = None;
        times
            .iter()
            .map(|&now| {
                let step = step(params, state.as_ref(), now, 1.0);
                let verdict = step.verdict;
                if step.write.is_some() {
                    state = Some(written(step));
                }
                verdict
            })
            .collect()
    }

    #[test]
    fn a_burst_passes_back_to_back_then_requests_are_spaced() {
        // 3 per 10 s, burst 3: the quickstart's /api/key.
        let p = params(Quota::new(3, std::time::Duration::from_secs(10)));
        let t0 = 1_700_000_000.0 * SECOND;
        let verdicts = run(&p, &[t0, t0, t0, t0]);
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
        assert_eq!(verdicts[2].reset_after_us, 10_000_000);
    }

    #[test]
    fn waiting_exactly_retry_after_is_enough_and_a_microsecond_less_is_not() {
        let p = params(Quota::new(3, std::time::Duration::from_secs(10)));
        let t0 = 1_700_000_000.0 * SECOND;
        let state = written(step(&p, None, t0, 3.0));
        let denied = step(&p, Some(&state), t0, 1.0).verdict;
        let wait = denied.retry_after_us as f64;
        assert_eq!(
            step(&p, Some(&state), t0 + wait - 1.0, 1.0).verdict.outcome,
            Outcome::Denied
        );
        assert_eq!(
            step(&p, Some(&state), t0 + wait, 1.0).verdict.outcome,
            Outcome::Allowed
        );
    }

    #[test]
    fn cost_above_burst_can_never_pass_and_cost_zero_only_peeks() {
        let p = params(Quota::per_second(10).with_burst(5));
        let never = step(&p, None, SECOND, 6.0);
        assert_eq!(never.verdict.outcome, Outcome::Never);
        assert!(never.write.is_none());
        let peek = step(&p, None, SECOND, 0.0);
        assert_eq!(peek.verdict.outcome, Outcome::Allowed);
        assert_eq!(peek.verdict.remaining, 5);
        assert!(peek.write.is_none(), "a peek writes nothing");
    }
}
