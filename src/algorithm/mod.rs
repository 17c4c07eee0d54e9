//! The pure state transition of every algorithm, used by the memory store.
//!
//! Each file mirrors its script in `lua/` operation for operation: numbers are `f64` holding
//! integer values below 2^53 (exact), combined in the same order as in Lua, so the memory store
//! and the Redis store reach identical decisions. The conformance tests hold both to that.

mod arith;
mod bucket;
pub(crate) mod fixed_window;
pub(crate) mod gcra;

use crate::decision::{Outcome, RuleVerdict};
use crate::policy::{Algorithm, Rule};

/// A rule's parameters as the scripts receive them: integers, time in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Params {
    pub(crate) algorithm: Algorithm,
    pub(crate) limit: f64,
    pub(crate) period: f64,
    pub(crate) burst: f64,
}

impl Params {
    pub(crate) fn of(rule: &Rule) -> Self {
        let quota = rule.quota();
        Self {
            algorithm: rule.algorithm(),
            limit: f64::from(quota.limit()),
            // Periods are validated to at most ten years, about 3.2e14 µs: exact in an f64.
            period: crate::clock::micros(quota.period()) as f64,
            burst: f64::from(quota.burst()),
        }
    }

    /// The algorithm's id in `lua/check.lua`.
    pub(crate) fn script_id(&self) -> u8 {
        match self.algorithm {
            Algorithm::FixedWindow => 1,
            Algorithm::Gcra => 2,
        }
    }
}

/// The stored state of one rule for one key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum State {
    FixedWindow(fixed_window::State),
    Gcra(gcra::State),
}

/// The result of evaluating one rule: a verdict and, when the request is admitted with a cost,
/// the state to store and for how long (µs) it matters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Step {
    pub(crate) verdict: RuleVerdict,
    pub(crate) next: Option<(State, u64)>,
}

/// Evaluates one rule at `now` (µs since the epoch) for a request of `cost`.
pub(crate) fn step(params: &Params, state: Option<&State>, now: f64, cost: f64) -> Step {
    match params.algorithm {
        Algorithm::FixedWindow => {
            let state = match state {
                Some(State::FixedWindow(state)) => Some(state),
                _ => None,
            };
            let (verdict, next) = fixed_window::step(params, state, now, cost);
            Step {
                verdict,
                next: next.map(|(state, ttl)| (State::FixedWindow(state), ttl)),
            }
        }
        Algorithm::Gcra => {
            let state = match state {
                Some(State::Gcra(state)) => Some(state),
                _ => None,
            };
            let (verdict, next) = gcra::step(params, state, now, cost);
            Step {
                verdict,
                next: next.map(|(state, ttl)| (State::Gcra(state), ttl)),
            }
        }
    }
}

/// Builds a verdict from the script's integer-valued numbers, as Redis would reply them.
fn verdict(
    outcome: Outcome,
    remaining: f64,
    used: f64,
    reset_after: f64,
    retry_after: f64,
) -> RuleVerdict {
    RuleVerdict {
        outcome,
        remaining: remaining as u64,
        used: used as u64,
        reset_after_us: reset_after as u64,
        retry_after_us: retry_after as u64,
    }
}
