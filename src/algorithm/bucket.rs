//! The meter shared by GCRA and the token bucket, as `bucket` and `drain` in `lua/common.lua`.
//!
//! A level is measured in units of 1/period of a request: one request adds `period` units and the
//! bucket drains `limit` units per microsecond, so levels stay exact integers. `limit` and `period`
//! arrive divided by their gcd (see `Params`), which keeps `burst * period` below 2^53.

use super::arith::{ceil_div, floor_div};
use super::{Params, verdict};
use crate::decision::{Outcome, RuleVerdict};

/// Evaluates a request of `cost` against a bucket holding `level` units now. Returns the verdict
/// and the new level when the request is admitted with a cost.
pub(super) fn evaluate(params: &Params, level: f64, cost: f64) -> (RuleVerdict, Option<f64>) {
    let Params {
        limit,
        period,
        burst,
        ..
    } = *params;
    let capacity = burst * period;
    let need = cost * period;
    let room = (capacity - level).max(0.0);
    if need > capacity {
        let v = verdict(
            Outcome::Never,
            floor_div(room, period),
            ceil_div(level, period),
            ceil_div(level, limit),
            0.0,
        );
        return (v, None);
    }
    // `capacity - need` first: `level + need` could pass 2^53 when the level is near a capacity
    // close to it; this order keeps every intermediate value within [-capacity, capacity].
    let excess = level - (capacity - need);
    if excess > 0.0 {
        let v = verdict(
            Outcome::Denied,
            floor_div(room, period),
            ceil_div(level, period),
            ceil_div(level, limit),
            ceil_div(excess, limit),
        );
        return (v, None);
    }
    let new_level = level + need;
    let v = verdict(
        Outcome::Allowed,
        floor_div(capacity - new_level, period),
        ceil_div(new_level, period),
        ceil_div(new_level, limit),
        0.0,
    );
    (v, (cost > 0.0).then_some(new_level))
}

/// The level of a bucket that held `level` units at `since`, drained to `now`.
pub(super) fn drain(level: f64, since: f64, now: f64, limit: f64) -> f64 {
    let elapsed = now - since;
    if elapsed <= 0.0 {
        return level;
    }
    // The product can pass 2^53 after a long idle time, but rounding is monotonic: whenever the
    // exact product is below the (exact) level, so is the rounded one, and it is exact.
    let drained = elapsed * limit;
    if drained >= level {
        0.0
    } else {
        level - drained
    }
}
