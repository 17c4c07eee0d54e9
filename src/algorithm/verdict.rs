//! What one rule said about one request: the [`Outcome`] and the numbers behind it.

use std::time::Duration;

/// The verdict on a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The request passes and was counted.
    Allowed,
    /// The request is over the quota; it may pass after
    /// [`Decision::retry_after`](crate::Decision::retry_after).
    Denied,
    /// The request costs more than the quota can ever hold: retrying will never help. The layer
    /// answers 429 without `Retry-After`, since no wait would let it in.
    Never,
}

/// What one rule of a policy said about one request.
///
/// Stores compute one verdict per rule and combine them with
/// [`Decision::from_verdicts`](crate::Decision::from_verdicts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleVerdict {
    pub(crate) outcome: Outcome,
    pub(crate) remaining: u64,
    pub(crate) used: u64,
    pub(crate) full_after_us: u64,
    /// 0 unless the outcome is `Denied`.
    pub(crate) retry_after_us: u64,
    /// How long an admitted request waits before it is served (a rule with a `max_delay`); 0
    /// unless the outcome is `Allowed`.
    pub(crate) delay_us: u64,
}

impl RuleVerdict {
    /// A verdict. `retry_after` only matters for [`Outcome::Denied`].
    pub fn new(
        outcome: Outcome,
        remaining: u64,
        used: u64,
        full_after: Duration,
        retry_after: Duration,
    ) -> Self {
        Self {
            outcome,
            remaining,
            used,
            full_after_us: crate::clock::micros(full_after),
            retry_after_us: if outcome == Outcome::Denied {
                crate::clock::micros(retry_after)
            } else {
                0
            },
            delay_us: 0,
        }
    }

    /// The same verdict, for a request admitted to wait `delay` before it is served (a rule with
    /// a [`max_delay`](crate::Rule::with_max_delay)). Only an allowed verdict waits.
    pub fn with_delay(self, delay: Duration) -> Self {
        Self {
            delay_us: if self.outcome == Outcome::Allowed {
                crate::clock::micros(delay)
            } else {
                0
            },
            ..self
        }
    }

    /// A verdict from the numbers a script replies (all µs), whose one `wait` is a refusal's
    /// retry-after or an admitted request's delay, as the outcome says.
    pub(crate) fn from_wait(
        outcome: Outcome,
        remaining: u64,
        used: u64,
        full_after_us: u64,
        wait: u64,
    ) -> Self {
        Self {
            outcome,
            remaining,
            used,
            full_after_us,
            retry_after_us: if outcome == Outcome::Denied { wait } else { 0 },
            delay_us: if outcome == Outcome::Allowed { wait } else { 0 },
        }
    }

    /// The verdict's outcome.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// How many more requests of cost 1 the rule admits right now.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How much of the rule's capacity is in use.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// How long until the rule's full capacity is available again.
    pub fn full_after(&self) -> Duration {
        Duration::from_micros(self.full_after_us)
    }

    /// This verdict with the counts of `uncounted`, the same rule's view of the state without
    /// this request's cost: what a rule that admitted a request another rule refused has left,
    /// since nothing was counted.
    pub(crate) fn with_counts_of(self, uncounted: RuleVerdict) -> Self {
        Self {
            remaining: uncounted.remaining,
            used: uncounted.used,
            full_after_us: uncounted.full_after_us,
            ..self
        }
    }
}
