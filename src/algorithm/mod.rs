//! The pure state transition of every algorithm, used by the memory store.
//!
//! Each file mirrors its script in `lua/` operation for operation, combined in the same order as
//! in Lua, so the memory store and the Redis store reach identical decisions. The scripts compute
//! in doubles holding integers below 2^53, which are exact; here the same integers are `i64`,
//! exact too, so both compute the same numbers. Where a script's number can pass 2^53, the
//! algorithm says why the result is still the same (a product only compared, which rounds
//! monotonically there and saturates here; a reported value, rounded here as the double rounds,
//! see `arith`). Signed, so that intermediate negatives (a clock gone back, an excess below zero)
//! behave as in Lua. The conformance tests hold both stores to that.
//!
//! A step reads the state and returns a verdict plus, when the request is admitted with a cost,
//! a [`Write`]: the store applies it only if every rule of the policy admitted the request, the
//! way the scripts return a write function that `lua/decide.lua` runs only then.

mod arith;
mod bucket;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
mod kind;
mod params;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
#[cfg(test)]
mod testing;
pub(crate) mod token_bucket;
mod verdict;

pub(crate) use self::arith::MAX_EXACT;
pub use self::kind::Algorithm;
pub(crate) use self::params::Params;
pub use self::verdict::{Outcome, RuleVerdict};

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
    /// Applies the write to the rule's state: in place if it is `live`, else to a fresh state
    /// (state that no longer matters is never updated).
    #[inline(always)]
    pub(crate) fn apply(self, state: &mut State, live: bool) {
        match (self, state) {
            // A bucket's state over one of its kind: copied in place, without first dropping the
            // old state (a call, as `State` may own a box).
            (Write::Set(State::Gcra(new)), State::Gcra(old)) => *old = new,
            (Write::Set(State::TokenBucket(new)), State::TokenBucket(old)) => *old = new,
            (Write::Set(new), state) => *state = new,
            (Write::Log(append), State::SlidingLog(log)) if live => append.apply(log),
            (Write::Window(add), State::SlidingWindow(window)) if live => add.apply(window),
            (write, state) => *state = write.into_state(),
        }
    }

    /// The state of a rule that had none (or none still live).
    #[inline]
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
/// `now` is below 2^53 (the year 2255), as the scripts need it to be exact.
#[inline]
pub(crate) fn step(params: &Params, state: Option<&State>, now: i64, cost: i64) -> Step {
    step_then(params, state, now, cost, |step| step)
}

/// [`step`], handing the step to `then` within the algorithm's own branch. The caller's use of the
/// step is compiled once per algorithm, so the step stays in registers: a step returned from the
/// branches would be merged in memory, each branch storing it field by field and the caller
/// loading it in wider words, which the CPU cannot forward from its store buffer (a stall that cost
/// a memory-store decision about a tenth of its time).
#[inline(always)]
pub(crate) fn step_then<R>(
    params: &Params,
    state: Option<&State>,
    now: i64,
    cost: i64,
    then: impl FnOnce(Step) -> R,
) -> R {
    match params.algorithm {
        Algorithm::FixedWindow => {
            let state = match state {
                Some(State::FixedWindow(state)) => Some(state),
                _ => None,
            };
            then(fixed_window::step(params, state, now, cost))
        }
        Algorithm::SlidingLog => {
            let state = match state {
                Some(State::SlidingLog(state)) => Some(&**state),
                _ => None,
            };
            then(sliding_log::step(params, state, now, cost))
        }
        Algorithm::SlidingWindow { .. } => {
            let state = match state {
                Some(State::SlidingWindow(state)) => Some(&**state),
                _ => None,
            };
            then(sliding_window::step(params, state, now, cost))
        }
        Algorithm::TokenBucket => {
            let state = match state {
                Some(State::TokenBucket(state)) => Some(state),
                _ => None,
            };
            then(bucket::step(params, state, now, cost))
        }
        Algorithm::Gcra => {
            let state = match state {
                Some(State::Gcra(state)) => Some(state),
                _ => None,
            };
            then(bucket::step(params, state, now, cost))
        }
    }
}

/// Builds a verdict from the script's numbers, as Redis would reply them. None is negative; were
/// one, it would read as 0 rather than wrap. `wait` is the reply's one slot for both waits: a
/// refusal's retry-after, an admitted request's delay (see `RuleVerdict::from_wait`).
#[inline]
fn verdict(outcome: Outcome, remaining: i64, used: i64, full_after: i64, wait: i64) -> RuleVerdict {
    let reply = |x: i64| x.max(0) as u64;
    RuleVerdict::from_wait(
        outcome,
        reply(remaining),
        reply(used),
        reply(full_after),
        reply(wait),
    )
}

impl Step {
    /// A step that writes `write`, if any, for state that matters `ttl` more µs.
    fn new(verdict: RuleVerdict, write: Option<Write>, ttl: u64) -> Self {
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
    use super::testing::{T0, params};
    use super::*;
    use crate::quota::Quota;

    #[test]
    fn a_rule_state_stays_small_whatever_the_algorithm() {
        // The memory store keeps one per rule per key, up to a million keys: the growing states
        // (log, window) are boxed so the others stay three words.
        assert!(std::mem::size_of::<State>() <= 24);
    }

    #[test]
    fn a_write_updates_live_state_in_place_and_replaces_state_that_no_longer_matters() {
        let log = params(Algorithm::SlidingLog, Quota::per_second(10));
        let write = |now| step(&log, None, now, 2).write.unwrap().0;
        let entries = |state: &State| match state {
            State::SlidingLog(log) => log.len(),
            other => panic!("expected a log, got {other:?}"),
        };
        let mut state = write(T0).into_state();
        write(T0 + 1).apply(&mut state, true);
        assert_eq!(entries(&state), 4);
        write(T0 + 2).apply(&mut state, false);
        assert_eq!(entries(&state), 2);
        // A state of another kind is replaced, live or not.
        let gcra = params(Algorithm::Gcra, Quota::per_second(10));
        let set = step(&gcra, None, T0, 1).write.unwrap().0;
        set.apply(&mut state, true);
        assert!(matches!(state, State::Gcra(_)));
        // A bucket's state over one of its kind, live or not, is the new state exactly.
        for live in [true, false] {
            let next = step(&gcra, Some(&state), T0 + 5, 1).write.unwrap().0;
            let Write::Set(expected) = next.clone() else {
                panic!("a bucket sets its state");
            };
            next.apply(&mut state, live);
            assert_eq!(state, expected);
        }
        write(T0 + 3).apply(&mut state, true);
        assert_eq!(entries(&state), 2);
    }
}
