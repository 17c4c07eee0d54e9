//! The pure state transition of every algorithm, used by the memory store.
//!
//! Each file mirrors its script in `lua/` operation for operation: numbers are `f64` holding
//! integer values below 2^53 (exact), combined in the same order as in Lua, so the memory store
//! and the Redis store reach identical decisions. The conformance tests hold both to that.
//!
//! A step reads the state and returns a verdict plus, when the request is admitted with a cost,
//! a [`Write`]: the store applies it only if every rule of the policy admitted the request, the
//! way the scripts return a write function that `lua/check.lua` runs only then.

mod arith;
mod bucket;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
mod params;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod token_bucket;

pub(crate) use self::params::Params;
use crate::decision::{Outcome, RuleVerdict};
use crate::policy::Algorithm;

/// The stored state of one rule for one key. Small and fixed-size states are kept inline; the
/// two that grow with the quota are boxed, so every other key's entry stays small.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum State {
    FixedWindow(fixed_window::State),
    SlidingLog(Box<sliding_log::State>),
    SlidingWindow(Box<sliding_window::State>),
    TokenBucket(token_bucket::State),
    Gcra(gcra::State),
}

/// What an admitted request changes, applied only when every rule of the policy admits it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Write {
    /// Replace the rule's state.
    Set(State),
    /// Append to a sliding log (in place: the log can hold thousands of entries).
    Log(sliding_log::Append),
    /// Add to a sliding window's current count.
    Window(sliding_window::Add),
}

impl Write {
    /// Applies the write to the rule's live state.
    pub(crate) fn update(self, state: &mut State) {
        match (self, state) {
            (Write::Log(append), State::SlidingLog(log)) => append.apply(log),
            (Write::Window(add), State::SlidingWindow(window)) => add.apply(window),
            (write, state) => *state = write.into_state(),
        }
    }

    /// The state of a rule that had none (or none still live).
    pub(crate) fn into_state(self) -> State {
        match self {
            Write::Set(state) => state,
            Write::Log(append) => State::SlidingLog(Box::new(append.into_log())),
            Write::Window(add) => State::SlidingWindow(Box::new(add.into_window())),
        }
    }
}

/// The result of evaluating one rule: a verdict and, when the request is admitted with a cost,
/// the write to apply and for how long (µs) the state will matter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Step {
    pub(crate) verdict: RuleVerdict,
    pub(crate) write: Option<(Write, u64)>,
}

/// Evaluates one rule at `now` (µs since the epoch) for a request of `cost`. State of another
/// algorithm (which the storage keys rule out) counts as none.
pub(crate) fn step(params: &Params, state: Option<&State>, now: f64, cost: f64) -> Step {
    match params.algorithm {
        Algorithm::FixedWindow => {
            let state = match state {
                Some(State::FixedWindow(state)) => Some(state),
                _ => None,
            };
            fixed_window::step(params, state, now, cost)
        }
        Algorithm::SlidingLog => {
            let state = match state {
                Some(State::SlidingLog(state)) => Some(&**state),
                _ => None,
            };
            sliding_log::step(params, state, now, cost)
        }
        Algorithm::SlidingWindow { .. } => {
            let state = match state {
                Some(State::SlidingWindow(state)) => Some(&**state),
                _ => None,
            };
            sliding_window::step(params, state, now, cost)
        }
        Algorithm::TokenBucket => {
            let state = match state {
                Some(State::TokenBucket(state)) => Some(state),
                _ => None,
            };
            token_bucket::step(params, state, now, cost)
        }
        Algorithm::Gcra => {
            let state = match state {
                Some(State::Gcra(state)) => Some(state),
                _ => None,
            };
            gcra::step(params, state, now, cost)
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

impl Step {
    /// A step that writes `write`, if any, for state that matters `ttl` more µs.
    fn new(verdict: RuleVerdict, write: Option<Write>, ttl: f64) -> Self {
        Step {
            verdict,
            write: write.map(|write| (write, arith::ttl_micros(ttl))),
        }
    }

    /// A step that writes nothing (a denial, a request that can never pass).
    fn read_only(verdict: RuleVerdict) -> Self {
        Step {
            verdict,
            write: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_state_stays_small_whatever_the_algorithm() {
        // The memory store keeps one per rule per key, up to a million keys: the growing states
        // (log, window) are boxed so the others stay three words.
        assert!(std::mem::size_of::<State>() <= 24);
    }
}
