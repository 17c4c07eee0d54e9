//! The sliding window counter's reference model, exact where the crate's estimate is, and the
//! bounds the crate promises where it documents the estimate as approximate.

use std::collections::BTreeMap;
use std::time::Duration;

use tower_redis_ratelimit::Decision;

use super::WEIGHT_RANGE;
use super::models::{Model, Prediction, ceil_div, expected};
use tower_redis_ratelimit::decision::Outcome;

/// Every admitted request `(time, cost)`; sub-interval counts are recomputed from them, and the
/// trailing sub-interval weighs exactly the fraction of it still in the window: at `offset` µs
/// into sub-interval `current`, `(size - offset) / size` of sub-interval `current - n`.
pub(super) struct WindowModel {
    limit: u128,
    n: u128,
    size: u128,
    /// The crate documents its estimate as exact while `limit * size <= 2^52`. Beyond that it
    /// measures the overlap in steps of `step` µs, the smallest that keeps `limit * steps`
    /// within 2^52 (found here by search), and rounds the elapsed steps down.
    step: Option<u128>,
    admitted: Vec<(u128, u128)>,
}

/// What the crate promises about an approximate sliding window's verdict.
pub(super) struct WindowBounds {
    limit: u128,
    cost: u128,
    /// The exact estimate, and the most the coarse steps may add to it.
    used: u128,
    slack: u128,
    /// The reset if nothing is admitted, and if this request is.
    reset: u128,
    reset_admitted: u128,
    /// When the request fits by the exact estimate (µs from now), if it does not now.
    exact_retry: Option<u128>,
}

impl WindowModel {
    pub(super) fn new(limit: u64, period: u64, n: u64) -> Self {
        let (limit, size) = (u128::from(limit), u128::from(period / n));
        let range = u128::from(WEIGHT_RANGE);
        let step = (limit * size > range).then(|| {
            let fits = |step: u128| limit * ceil_div(size, step) <= range;
            let (mut low, mut high) = (1, size);
            while low < high {
                let mid = (low + high) / 2;
                if fits(mid) {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            low
        });
        WindowModel {
            limit,
            n: u128::from(n),
            size,
            step,
            admitted: Vec::new(),
        }
    }

    fn counts(&self) -> BTreeMap<u128, u128> {
        let mut counts = BTreeMap::new();
        for &(time, cost) in &self.admitted {
            *counts.entry(time / self.size).or_default() += cost;
        }
        counts
    }

    /// The counts of the sub-intervals fully in the window at sub-interval `current`, and of the
    /// trailing one.
    fn full_and_trailing(&self, counts: &BTreeMap<u128, u128>, current: u128) -> (u128, u128) {
        let full = counts
            .range((current + 1).saturating_sub(self.n)..=current)
            .map(|(_, &count)| count)
            .sum();
        let trailing = current
            .checked_sub(self.n)
            .and_then(|index| counts.get(&index))
            .copied()
            .unwrap_or(0);
        (full, trailing)
    }

    /// The exact estimate at time `t`, times `size` (so it is an integer).
    fn scaled_estimate(&self, counts: &BTreeMap<u128, u128>, t: u128) -> u128 {
        let (full, trailing) = self.full_and_trailing(counts, t / self.size);
        full * self.size + trailing * (self.size - t % self.size)
    }

    fn fits(&self, counts: &BTreeMap<u128, u128>, t: u128, cost: u128) -> bool {
        self.scaled_estimate(counts, t) + cost * self.size <= self.limit * self.size
    }

    /// The earliest µs at or after `now` at which the request fits by the exact estimate: each
    /// sub-interval from now on is searched (the estimate never rises while nothing is admitted),
    /// and by `n + 1` sub-intervals on every count has left.
    fn fits_at(&self, counts: &BTreeMap<u128, u128>, now: u128, cost: u128) -> u128 {
        let current = now / self.size;
        for index in current..=current + self.n + 1 {
            let mut low = if index == current {
                now
            } else {
                index * self.size
            };
            let mut high = (index + 1) * self.size - 1;
            if !self.fits(counts, high, cost) {
                continue;
            }
            while low < high {
                let mid = (low + high) / 2;
                if self.fits(counts, mid, cost) {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            return low;
        }
        panic!("a request of cost {cost} <= limit never fits");
    }
}

impl Model for WindowModel {
    fn predict(&self, now: u64, cost: u64) -> Prediction {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let counts = self.counts();
        let current = now / self.size;
        let used = ceil_div(self.scaled_estimate(&counts, now), self.size);
        // The full limit is back once the newest counted sub-interval has slid out entirely.
        let reset = counts
            .keys()
            .next_back()
            .filter(|&&newest| newest + self.n >= current)
            .map_or(0, |&newest| (newest + self.n + 1) * self.size - now);
        let fits = cost <= self.limit && self.fits(&counts, now, cost);
        if let Some(step) = self.step {
            // At most two steps of the trailing sub-interval's weight: the steps round the elapsed
            // time down by less than one, and the last step may be shorter than the others.
            let (_, trailing) = self.full_and_trailing(&counts, current);
            let slack = ceil_div(2 * trailing * step, self.size);
            let exact_retry =
                (cost <= self.limit && !fits).then(|| self.fits_at(&counts, now, cost) - now);
            return Prediction::Bounds(WindowBounds {
                limit: self.limit,
                cost,
                used,
                slack,
                reset,
                reset_admitted: (current + self.n + 1) * self.size - now,
                exact_retry,
            });
        }
        let room = self.limit.saturating_sub(used);
        Prediction::Exact(if cost > self.limit {
            expected(Outcome::Never, room, used, reset, 0)
        } else if !fits {
            let retry = self.fits_at(&counts, now, cost) - now;
            expected(Outcome::Denied, room, used, reset, retry)
        } else if cost > 0 {
            let reset = (current + self.n + 1) * self.size - now;
            expected(Outcome::Allowed, room - cost, used + cost, reset, 0)
        } else {
            expected(Outcome::Allowed, room, used, reset, 0)
        })
    }

    fn admit(&mut self, now: u64, cost: u64) {
        self.admitted.push((u128::from(now), u128::from(cost)));
    }
}

impl WindowBounds {
    /// Whether `decision` keeps the crate's promises for an approximate window.
    pub(super) fn check(&self, decision: &Decision) -> Result<(), String> {
        let used = u128::from(decision.used());
        let remaining = u128::from(decision.remaining());
        let reset = decision.full_after().as_micros();
        let admitted = decision.outcome() == Outcome::Allowed;
        // The estimate before this request, as the decision reports it.
        let before = if admitted {
            used.saturating_sub(self.cost)
        } else {
            used
        };
        let expected_reset = if admitted && self.cost > 0 {
            self.reset_admitted
        } else {
            self.reset
        };
        let waits_long_enough = match (decision.outcome(), decision.retry_after()) {
            (Outcome::Denied, Some(retry)) => {
                retry > Duration::ZERO && retry.as_micros() >= self.exact_retry.unwrap_or(0)
            }
            (Outcome::Denied, None) => false,
            _ => true,
        };
        let promises = [
            (
                (self.cost > self.limit) == (decision.outcome() == Outcome::Never),
                "it can never pass exactly when the cost exceeds the limit",
            ),
            (
                self.used <= before && before <= self.used + self.slack,
                "the estimate is the exact one plus at most two steps' worth",
            ),
            (
                remaining == self.limit.saturating_sub(used),
                "remaining is what the estimate leaves",
            ),
            (
                !admitted || self.exact_retry.is_none(),
                "it never admits what the exact estimate denies",
            ),
            (
                reset == expected_reset,
                "reset is when the newest count leaves",
            ),
            (
                waits_long_enough,
                "a denial waits no less than the exact estimate would",
            ),
        ];
        match promises.iter().find(|(kept, _)| !kept) {
            Some((_, promise)) => Err(format!(
                "{promise}: exact estimate {} (+ at most {}), reset {}, exact retry {:?}",
                self.used, self.slack, self.reset, self.exact_retry
            )),
            None => Ok(()),
        }
    }
}
