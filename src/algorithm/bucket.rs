//! The meter shared by GCRA and the token bucket, as `bucket`, `from_now`, `drain` and
//! `bucket_at` in `lua/common.lua`.
//!
//! A level is measured in units of 1/period of a request: one request adds `period` units and the
//! bucket drains `limit` units per microsecond, so levels stay exact integers. `limit` and `period`
//! arrive divided by their gcd (see `Params`), which keeps `burst * period` below 2^53.

use super::arith::{ceil_div, floor_div};
use super::{Params, verdict};
use crate::decision::{Outcome, RuleVerdict};

/// Evaluates a request of `cost` against a bucket holding `level` units at the time it is
/// evaluated, `lead` µs after now (0 unless the clock went back, see [`at`]): reported waits count
/// from now, so they include it. Returns the verdict and the new level when the request is
/// admitted with a cost.
pub(super) fn evaluate(
    params: &Params,
    level: f64,
    lead: f64,
    cost: f64,
) -> (RuleVerdict, Option<f64>) {
    let Params {
        limit,
        period,
        burst,
        ..
    } = *params;
    let capacity = burst * period;
    let need = cost * period;
    // The level can exceed the capacity when a rule's burst was lowered while state was live.
    let room = (capacity - level).max(0.0);
    if need > capacity {
        let v = verdict(
            Outcome::Never,
            floor_div(room, period),
            ceil_div(level, period),
            from_now(ceil_div(level, limit), lead),
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
            from_now(ceil_div(level, limit), lead),
            from_now(ceil_div(excess, limit), lead),
        );
        return (v, None);
    }
    let new_level = level + need;
    let v = verdict(
        Outcome::Allowed,
        floor_div(capacity - new_level, period),
        ceil_div(new_level, period),
        from_now(ceil_div(new_level, limit), lead),
        0.0,
    );
    (v, (cost > 0.0).then_some(new_level))
}

/// A wait of `us` µs from a time `lead` µs ahead of now, counted from now (no wait stays none).
fn from_now(us: f64, lead: f64) -> f64 {
    if us > 0.0 { us + lead } else { 0.0 }
}

/// The level of a bucket that held `level` units at `since`, drained to `now` (`>= since`).
fn drain(level: f64, since: f64, now: f64, limit: f64) -> f64 {
    // The product can pass 2^53 after a long idle time, but rounding is monotonic: whenever the
    // exact product is below the (exact) level, so is the rounded one, and it is exact.
    let drained = (now - since) * limit;
    if drained >= level {
        0.0
    } else {
        level - drained
    }
}

/// A bucket that held `level` units at `since`, as it stands for a request at `now`: its level
/// and the time it is evaluated at, which is stored as its new `since`.
///
/// Time never runs backwards for a bucket. A clock behind `since` (the server's clock stepped
/// back, or callers' times disagree) finds the bucket as it was at `since`, neither drained nor
/// refilled, and the bucket stays at `since`: moving `since` back to now would let the next later
/// request drain the interval from now to `since` a second time, a refund (alternating two times
/// a second apart once admitted every request).
///
/// But no bucket of this rule is worth honouring further ahead than a full one takes to drain
/// (`capacity` units): such a `since` is foreign (another rule's state, a clock stepped back by
/// more than that) and would hold the client back for as long as it lies ahead. The bucket then
/// counts as empty, from now, so no reported wait or TTL exceeds twice the drain time.
pub(super) fn at(level: f64, since: f64, now: f64, limit: f64, capacity: f64) -> (f64, f64) {
    let lead = since - now;
    if lead <= 0.0 {
        return (drain(level, since, now, limit), now);
    }
    // lead > capacity / limit, exactly: both operands are integers below 2^53, so a product at
    // or below the capacity is exact, and one above it rounds to no less than the capacity + 1.
    if lead * limit > capacity {
        return (0.0, now);
    }
    (level, since)
}
