//! What the algorithms' tests share: a time to start from, a rule's parameters, and one key
//! stepped request by request, its state kept as the memory store keeps it.

use super::{Algorithm, Outcome, Params, RuleVerdict, State, step};
use crate::quota::Quota;

/// 2023-11-14T00:00:00Z: a whole number of days, so every sub-interval used in a test starts on
/// it.
pub(super) const T0: i64 = 1_699_920_000_000_000;
/// A second, in µs.
pub(super) const SECOND: i64 = 1_000_000;

/// The parameters of a rule enforcing `quota` with `algorithm`.
pub(super) fn params(algorithm: Algorithm, quota: Quota) -> Params {
    Params::new("t", algorithm, quota).unwrap()
}

/// One key under one rule: its state, if any, written as every admitted request leaves it.
pub(super) struct OneKey {
    pub(super) params: Params,
    pub(super) state: Option<State>,
}

impl OneKey {
    /// A key that has made no request yet.
    pub(super) fn new(algorithm: Algorithm, quota: Quota) -> Self {
        OneKey {
            params: params(algorithm, quota),
            state: None,
        }
    }

    /// A request of `cost` at `now`: its verdict, and the write of an admitted one applied.
    pub(super) fn request(&mut self, now: i64, cost: i64) -> RuleVerdict {
        let step = step(&self.params, self.state.as_ref(), now, cost);
        if let Some((write, _)) = step.write {
            match &mut self.state {
                Some(state) => write.apply(state, true),
                state => *state = Some(write.into_state()),
            }
        }
        step.verdict
    }

    /// Asserts that a request of cost 0 on the key, which has no state, only peeks: it is
    /// allowed, finds all `limit` units left and nothing to reset, and writes nothing.
    pub(super) fn assert_peek_writes_nothing(&mut self, limit: u64) {
        assert!(self.state.is_none(), "the key has state already");
        let peek = self.request(T0, 0);
        assert_eq!(
            (peek.outcome, peek.remaining, peek.full_after_us),
            (Outcome::Allowed, limit, 0)
        );
        assert!(self.state.is_none(), "a peek writes nothing");
    }
}
