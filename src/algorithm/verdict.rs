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
    pub(crate) retry_after_us: u64,
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
        }
    }

    /// The verdict's outcome.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }
}
