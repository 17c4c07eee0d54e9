//! The reference models of the fixed window, the sliding log and the buckets (the sliding window's
//! is in `window_model`), and the rule a decision of several rules must report.

use tower_redis_ratelimit::Decision;

use super::strategies::{Algo, Spec};
use super::window_model::{WindowBounds, WindowModel};
use tower_redis_ratelimit::decision::Outcome;

/// What a rule says about one request, as the model computes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Expected {
    pub(super) outcome: Outcome,
    pub(super) remaining: u128,
    pub(super) used: u128,
    pub(super) reset: u128,
    /// 0 unless denied.
    pub(super) retry: u128,
}

pub(super) fn expected(
    outcome: Outcome,
    remaining: u128,
    used: u128,
    reset: u128,
    retry: u128,
) -> Expected {
    Expected {
        outcome,
        remaining,
        used,
        reset,
        retry,
    }
}

/// A model's prediction: exact, or (for a sliding window the crate documents as approximate) the
/// documented bounds.
pub(super) enum Prediction {
    Exact(Expected),
    Bounds(WindowBounds),
}

/// A rule's reference model: what it says about a request, and what admitting one changes.
pub(super) trait Model {
    fn predict(&self, now: u64, cost: u64) -> Prediction;
    fn admit(&mut self, now: u64, cost: u64);
}

pub(super) fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

/// A window of `period` from the key's first request after the previous window.
struct FixedWindowModel {
    limit: u128,
    period: u128,
    window: Option<(u128, u128)>,
}

impl FixedWindowModel {
    fn current(&self, now: u128) -> (u128, u128) {
        match self.window {
            Some((start, used)) if now < start + self.period => (start, used),
            _ => (now, 0),
        }
    }
}

impl Model for FixedWindowModel {
    fn predict(&self, now: u64, cost: u64) -> Prediction {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let (start, used) = self.current(now);
        let reset = start + self.period - now;
        let room = self.limit.saturating_sub(used);
        Prediction::Exact(if cost > self.limit {
            expected(Outcome::Never, room, used, reset, 0)
        } else if used + cost > self.limit {
            expected(Outcome::Denied, room, used, reset, reset)
        } else {
            expected(Outcome::Allowed, room - cost, used + cost, reset, 0)
        })
    }

    fn admit(&mut self, now: u64, cost: u64) {
        let (start, used) = self.current(u128::from(now));
        self.window = Some((start, used + u128::from(cost)));
    }
}

/// Every admitted unit's time, forever; a unit counts while `now - period < t`.
struct LogModel {
    limit: u128,
    period: u128,
    admitted: Vec<u128>,
}

impl Model for LogModel {
    fn predict(&self, now: u64, cost: u64) -> Prediction {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let mut in_window: Vec<u128> = self
            .admitted
            .iter()
            .copied()
            .filter(|&t| t + self.period > now)
            .collect();
        in_window.sort_unstable();
        let count = in_window.len() as u128;
        let reset = in_window.last().map_or(0, |&t| t + self.period - now);
        let room = self.limit.saturating_sub(count);
        Prediction::Exact(if cost > self.limit {
            expected(Outcome::Never, room, count, reset, 0)
        } else if count + cost > self.limit {
            let must_leave = (count + cost - self.limit) as usize;
            let retry = in_window[must_leave - 1] + self.period - now;
            expected(Outcome::Denied, room, count, reset, retry)
        } else {
            let reset = if cost > 0 {
                reset.max(self.period)
            } else {
                reset
            };
            expected(Outcome::Allowed, room - cost, count + cost, reset, 0)
        })
    }

    fn admit(&mut self, now: u64, cost: u64) {
        self.admitted
            .extend(std::iter::repeat_n(u128::from(now), cost as usize));
    }
}

/// Tokens, counted in units of 1/period of a token: `burst * period` when full, refilled at
/// `limit` units per µs. Both the token bucket and GCRA must behave like it.
struct BucketModel {
    limit: u128,
    period: u128,
    burst: u128,
    last: Option<(u128, u128)>,
}

impl BucketModel {
    fn capacity(&self) -> u128 {
        self.burst * self.period
    }

    fn tokens(&self, now: u128) -> u128 {
        match self.last {
            None => self.capacity(),
            Some((at, tokens)) => {
                (tokens + now.saturating_sub(at) * self.limit).min(self.capacity())
            }
        }
    }

    /// remaining, used, reset for a bucket holding `tokens`.
    fn report(&self, tokens: u128) -> (u128, u128, u128) {
        let missing = self.capacity() - tokens;
        (
            tokens / self.period,
            ceil_div(missing, self.period),
            ceil_div(missing, self.limit),
        )
    }
}

impl Model for BucketModel {
    fn predict(&self, now: u64, cost: u64) -> Prediction {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let tokens = self.tokens(now);
        let (remaining, used, reset) = self.report(tokens);
        let need = cost * self.period;
        Prediction::Exact(if cost > self.burst {
            expected(Outcome::Never, remaining, used, reset, 0)
        } else if need > tokens {
            let retry = ceil_div(need - tokens, self.limit);
            expected(Outcome::Denied, remaining, used, reset, retry)
        } else {
            let (remaining, used, reset) = self.report(tokens - need);
            expected(Outcome::Allowed, remaining, used, reset, 0)
        })
    }

    fn admit(&mut self, now: u64, cost: u64) {
        let now = u128::from(now);
        let tokens = self.tokens(now) - u128::from(cost) * self.period;
        self.last = Some((now, tokens));
    }
}

impl Spec {
    /// The rule's reference model, with nothing admitted yet.
    pub(super) fn model(&self) -> Box<dyn Model> {
        let (limit, period) = (u128::from(self.limit), u128::from(self.period_us));
        match self.algo {
            Algo::FixedWindow => Box::new(FixedWindowModel {
                limit,
                period,
                window: None,
            }),
            Algo::SlidingLog => Box::new(LogModel {
                limit,
                period,
                admitted: Vec::new(),
            }),
            Algo::SlidingWindow(n) => Box::new(WindowModel::new(
                u64::from(self.limit),
                self.period_us,
                u64::from(n),
            )),
            Algo::TokenBucket | Algo::Gcra => Box::new(BucketModel {
                limit,
                period,
                burst: u128::from(self.burst),
                last: None,
            }),
        }
    }
}

/// The rule a decision reports, as documented on `Decision`: a rule that can never admit the
/// request; else the denying rule with the longest wait; else the rule with the fewest requests
/// remaining, a tie going to the one that resets later. What is still tied goes to the rule
/// listed first.
fn most_restrictive(verdicts: &[Expected]) -> usize {
    if let Some(never) = verdicts.iter().position(|v| v.outcome == Outcome::Never) {
        return never;
    }
    let mut denied: Option<usize> = None;
    for (index, verdict) in verdicts.iter().enumerate() {
        if verdict.outcome == Outcome::Denied
            && denied.is_none_or(|best| verdict.retry > verdicts[best].retry)
        {
            denied = Some(index);
        }
    }
    if let Some(denied) = denied {
        return denied;
    }
    let mut fewest = 0;
    for (index, verdict) in verdicts.iter().enumerate().skip(1) {
        let best = &verdicts[fewest];
        if verdict.remaining < best.remaining
            || (verdict.remaining == best.remaining && verdict.reset > best.reset)
        {
            fewest = index;
        }
    }
    fewest
}

/// The decision a policy of `specs` must report for these verdicts, field by field (outcome,
/// reported rule, its capacity, remaining, used, reset, retry).
type Reported = (Outcome, usize, u128, u128, u128, u128, Option<u128>);

pub(super) fn expected_decision(specs: &[Spec], verdicts: &[Expected]) -> Reported {
    let index = most_restrictive(verdicts);
    let reported = verdicts[index];
    let outcome = if verdicts.iter().all(|v| v.outcome == Outcome::Allowed) {
        Outcome::Allowed
    } else {
        reported.outcome
    };
    (
        outcome,
        index,
        u128::from(specs[index].capacity()),
        reported.remaining,
        reported.used,
        reported.reset,
        (outcome == Outcome::Denied).then_some(reported.retry),
    )
}

pub(super) fn reported(decision: &Decision) -> Reported {
    (
        decision.outcome(),
        decision.rule_index(),
        u128::from(decision.limit()),
        u128::from(decision.remaining()),
        u128::from(decision.used()),
        decision.full_after().as_micros(),
        decision.retry_after().map(|retry| retry.as_micros()),
    )
}
