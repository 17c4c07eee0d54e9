//! Token bucket, as `lua/token_bucket.lua`: up to `burst` tokens, refilled at `limit` per
//! `period`, a request takes `cost` of them.
//!
//! The same meter as GCRA (`bucket`), kept as the tokens left rather than the level used: in
//! units of 1/period of a token, `tokens = burst * period - level`, and refilling `limit` units
//! per microsecond is draining the level at that rate. So both decide alike, in one step
//! ([`bucket::step`]); only the stored form differs.

use super::bucket;

/// The tokens left (units of 1/period of a token) at time `since` (µs since the epoch, never moved
/// back).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct State {
    pub(crate) since: i64,
    pub(crate) tokens: i64,
}

impl bucket::Stored for State {
    #[inline(always)]
    fn level(&self, capacity: i64) -> (i64, i64) {
        // More tokens than the capacity (the burst was lowered while the state was live) is a full
        // bucket.
        ((capacity - self.tokens).max(0), self.since)
    }

    #[inline(always)]
    fn store(since: i64, level: i64, capacity: i64) -> super::State {
        super::State::TokenBucket(State {
            since,
            tokens: capacity - level,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::bucket;
    use crate::algorithm::testing::{T0, params};
    use crate::algorithm::{Algorithm, Outcome, Params, Step, Write};
    use crate::quota::Quota;

    /// A token bucket rule's step.
    fn step(params: &Params, state: Option<&State>, now: i64, cost: i64) -> Step {
        bucket::step(params, state, now, cost)
    }

    fn written(step: &Step) -> State {
        match &step.write {
            Some((Write::Set(super::super::State::TokenBucket(state)), _)) => *state,
            other => panic!("expected a token bucket state, got {other:?}"),
        }
    }

    #[test]
    fn a_full_bucket_empties_then_refills_a_token_per_interval() {
        // Capacity 4, 2 tokens per second: gcd(2, 1e6) = 2, so a token is 500_000 units.
        let params = params(Algorithm::TokenBucket, Quota::per_second(2).with_burst(4));
        let mut state = None;
        for left in (0..4).rev() {
            let step = step(&params, state.as_ref(), T0, 1);
            assert_eq!(step.verdict.outcome, Outcome::Allowed);
            assert_eq!(step.verdict.remaining, left);
            state = Some(written(&step));
        }
        assert_eq!(state.unwrap().tokens, 0);
        let denied = step(&params, state.as_ref(), T0, 1).verdict;
        assert_eq!(denied.outcome, Outcome::Denied);
        assert_eq!(denied.retry_after_us, 500_000);
        assert_eq!(denied.full_after_us, 2_000_000);
        let later = step(&params, state.as_ref(), T0 + 500_000, 1);
        assert_eq!(later.verdict.outcome, Outcome::Allowed);
    }

    #[test]
    fn the_ttl_is_never_zero_for_a_tiny_bucket_at_a_high_rate() {
        // Stripe's sketch's TTL, floor(2 * capacity / rate), is 0 here: 1 token at 10^9 per second.
        let params = params(
            Algorithm::TokenBucket,
            Quota::per_second(1_000_000_000).with_burst(1),
        );
        let step = step(&params, None, T0, 1);
        assert_eq!(step.verdict.outcome, Outcome::Allowed);
        // A token refills in 1 ns: the state matters for (rounded up) 1 µs.
        assert_eq!(step.verdict.full_after_us, 1);
        assert_eq!(step.write.as_ref().unwrap().1, 1);
    }

    #[test]
    fn a_clock_behind_the_bucket_takes_tokens_without_refilling_or_moving_it_back() {
        let params = params(Algorithm::TokenBucket, Quota::per_second(2).with_burst(4));
        let ahead = written(&step(&params, None, T0 + 1_000_000, 2));
        let behind = step(&params, Some(&ahead), T0, 1);
        assert_eq!((behind.verdict.remaining, behind.verdict.used), (1, 3));
        assert_eq!(behind.verdict.full_after_us, 2_500_000);
        assert_eq!(
            written(&behind),
            State {
                since: T0 + 1_000_000,
                tokens: params.period
            }
        );
        // Back at the bucket's time, nothing has refilled in between.
        let peek = step(&params, Some(&written(&behind)), T0 + 1_000_000, 0);
        assert_eq!((peek.verdict.remaining, peek.verdict.used), (1, 3));
    }

    #[test]
    fn a_bucket_time_further_ahead_than_a_full_bucket_refills_is_foreign() {
        // Capacity 4 at 2 per second: an empty bucket refills in 2 s.
        let params = params(Algorithm::TokenBucket, Quota::per_second(2).with_burst(4));
        let empty = |since| State { since, tokens: 0 };
        let behind = step(&params, Some(&empty(T0 + 2_000_000)), T0, 0).verdict;
        assert_eq!((behind.used, behind.full_after_us), (4, 4_000_000));
        let foreign = step(&params, Some(&empty(T0 + 2_000_001)), T0, 1);
        assert_eq!(
            (foreign.verdict.remaining, foreign.verdict.full_after_us),
            (3, 500_000)
        );
        assert_eq!(written(&foreign).since, T0);
    }

    #[test]
    fn tokens_above_a_lowered_burst_count_as_a_full_bucket() {
        let params = params(Algorithm::TokenBucket, Quota::per_second(1));
        let overfull = State {
            since: T0,
            tokens: 10 * params.period,
        };
        let peek = step(&params, Some(&overfull), T0, 0).verdict;
        assert_eq!((peek.remaining, peek.used), (1, 0));
    }
}
