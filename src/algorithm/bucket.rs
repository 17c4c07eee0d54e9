//! The meter shared by GCRA and the token bucket, as `bucket`, `from_now`, `drain` and
//! `bucket_at` in `lua/common.lua`, and the step both scripts take around them; each algorithm's
//! file holds the form it stores the meter in.
//!
//! A level is measured in units of 1/period of a request: one request adds `period` units and the
//! bucket drains `limit` units per microsecond, so levels stay exact integers. `limit` and `period`
//! arrive divided by their gcd (see `Params`), which keeps `burst * period` below 2^53: a level
//! is exact in the scripts' doubles as in an `i64`.

use super::arith::{ceil_div, floor_div, lua_rounded};
use super::{Outcome, Params, RuleVerdict, State, Step, Write, verdict};

/// How a bucket algorithm stores the meter: GCRA the level used, the token bucket the tokens left.
/// Only the stored form differs; both decide alike.
pub(super) trait Stored {
    /// The level (units) this state holds and the time it holds it at (µs since the epoch,
    /// `since`), for a bucket of `capacity` units.
    fn level(&self, capacity: i64) -> (i64, i64);

    /// The state holding `level` units at `since`, for a bucket of `capacity` units.
    fn store(since: i64, level: i64, capacity: i64) -> State;
}

/// Evaluates a request of `cost` at `now` against a bucket stored as `S`, as `lua/gcra.lua` and
/// `lua/token_bucket.lua` do: the stored meter as it stands now (see [`at`]), then [`evaluate`]d;
/// an admitted request stores its new level, which matters until the bucket has drained.
#[inline(always)]
pub(super) fn step<S: Stored>(params: &Params, state: Option<&S>, now: i64, cost: i64) -> Step {
    let capacity = params.burst * params.period;
    let (level, at) = state.map_or((0, now), |state| {
        let (level, since) = state.level(capacity);
        self::at(level, since, now, params.limit, capacity)
    });
    let (verdict, new_level) = evaluate(params, level, at - now, cost);
    let write = new_level.map(|level| Write::Set(S::store(at, level, capacity)));
    Step::new(verdict, write, verdict.full_after_us)
}

/// Evaluates a request of `cost` against a bucket holding `level` units at the time it is
/// evaluated, `lead` µs after now (0 unless the clock went back, see [`at`]): reported waits count
/// from now, so they include it. Returns the verdict and the new level when the request is
/// admitted with a cost.
///
/// A rule with a `max_delay` admits levels up to its horizon (`params.extra`) past the capacity:
/// such a request takes its place in the schedule now and conforms, and is served, once the level
/// has drained back to the capacity (its delay). A refusal's `retry_after` is then when the
/// request would be admitted, to wait up to `max_delay`.
#[inline(always)]
pub(super) fn evaluate(
    params: &Params,
    level: i64,
    lead: i64,
    cost: i64,
) -> (RuleVerdict, Option<i64>) {
    let Params {
        limit,
        period,
        burst,
        extra: horizon,
        ..
    } = *params;
    let capacity = burst * period;
    // A cost up to u32::MAX times a period up to 2^49 can pass 2^53, and 2^63. It is only compared
    // with the capacity until it is known to be at most that: the script's rounded product
    // compares as the exact one would (rounding is monotonic, the capacity exact), and so does the
    // saturated one here.
    let need = cost.saturating_mul(period);
    // The level can exceed the capacity when a rule's burst was lowered while state was live, or
    // requests were admitted to wait.
    let room = (capacity - level).max(0);
    // A refused request leaves the bucket as it is, and reports it so.
    let refused = |outcome, retry_after| {
        let (remaining, used) = requests(room, level, burst, period);
        let full_after = from_now(ceil_div(level, limit), lead);
        verdict(outcome, remaining, used, full_after, retry_after)
    };
    if need > capacity + horizon {
        return (refused(Outcome::Never, 0), None);
    }
    // `capacity + horizon - need` first: `level + need` could pass 2^53 when the level is near a
    // capacity close to it; this order keeps every intermediate value within
    // [-(capacity + horizon), capacity + horizon] (Params keeps their sum below 2^53).
    let excess = level - (capacity + horizon - need);
    if excess > 0 {
        let retry_after = from_now(ceil_div(excess, limit), lead);
        return (refused(Outcome::Denied, retry_after), None);
    }
    let new_level = level + need;
    let (remaining, used) = requests((capacity - new_level).max(0), new_level, burst, period);
    // Past the capacity: the request waits until the level has drained back to it. A peek
    // (cost 0) takes no place in the schedule, and waits for none.
    let delay = if new_level > capacity && cost > 0 {
        from_now(ceil_div(new_level - capacity, limit), lead)
    } else {
        0
    };
    let v = verdict(
        Outcome::Allowed,
        remaining,
        used,
        from_now(ceil_div(new_level, limit), lead),
        delay,
    );
    (v, (cost > 0).then_some(new_level))
}

/// The script's `floor_div(room, period)` and `ceil_div(level, period)`, the requests left and
/// used, for a bucket holding `level` units with `room = max(0, capacity - level)` left.
///
/// One division gives both: with `capacity = burst * period`, `floor((capacity - level) / period)`
/// is exactly `burst - ceil(level / period)`, and where the level exceeds the capacity the room is
/// 0 and so is `max(0, burst - ceil(level / period))`. Exact integers in the script as here, so the
/// same numbers.
#[inline]
fn requests(room: i64, level: i64, burst: i64, period: i64) -> (i64, i64) {
    let used = ceil_div(level, period);
    let remaining = (burst - used).max(0);
    debug_assert_eq!(remaining, floor_div(room, period));
    (remaining, used)
}

/// A wait of `us` µs from a time `lead` µs ahead of now, counted from now (no wait stays none).
fn from_now(us: i64, lead: i64) -> i64 {
    // Each is below 2^53 (`lead * limit` is at most the capacity, see [`at`]), but their sum can
    // pass it when a bucket of almost 2^53 units at a rate of 1 per µs lies ahead of now: the
    // script's sum then rounds, and is reported rounded.
    if us > 0 { lua_rounded(us + lead) } else { 0 }
}

/// The level of a bucket that held `level` units at `since`, drained to `now` (`>= since`).
fn drain(level: i64, since: i64, now: i64, limit: i64) -> i64 {
    // The product can pass 2^53 after a long idle time, but rounding is monotonic: whenever the
    // exact product is below the (exact) level, so is the rounded one, and it is exact. Here the
    // product saturates instead of passing 2^63 (up to 2^53 µs times a u32 limit), which keeps
    // the comparison exact too.
    let drained = (now - since).saturating_mul(limit);
    if drained >= level { 0 } else { level - drained }
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
pub(super) fn at(level: i64, since: i64, now: i64, limit: i64, capacity: i64) -> (i64, i64) {
    let lead = since - now;
    if lead <= 0 {
        return (drain(level, since, now, limit), now);
    }
    // lead > capacity / limit, exactly: both operands are integers below 2^53, so in the script a
    // product at or below the capacity is exact, and one above it rounds to no less than the
    // capacity + 1. Here it saturates rather than pass 2^63, still above the capacity.
    if lead.saturating_mul(limit) > capacity {
        return (0, now);
    }
    (level, since)
}
