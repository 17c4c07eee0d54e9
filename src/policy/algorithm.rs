//! Which algorithm enforces a quota, and what each one promises: the public [`Algorithm`].
//! The state transitions themselves live in `src/algorithm/` and `lua/`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Quota;

/// The algorithm that enforces a quota.
///
/// Every algorithm exists twice: as a Lua script for the [`RedisStore`](crate::RedisStore) and as
/// a Rust state transition for the [`MemoryStore`](crate::MemoryStore). Both compute with the same
/// integers in the same order, so both stores reach identical decisions (the conformance suite
/// holds them to it). The [algorithms guide](crate::guide::algorithms) compares them with
/// measurements: Redis memory per key, a chart of each under the same traffic, and how far the
/// sliding window counter strays from the exact sliding log.
///
/// | algorithm | admits | state per client key |
/// |---|---|---|
/// | [`FixedWindow`](Algorithm::FixedWindow) | `limit` per window; a window starts with the key's first request | window start and count |
/// | [`SlidingLog`](Algorithm::SlidingLog) | `limit` in *any* `period`, exactly | one entry per admitted unit, at most `limit` (≤ 10,000) |
/// | [`SlidingWindow`](Algorithm::SlidingWindow) | `limit` in a `period` estimated from sub-interval counts | one count per sub-interval |
/// | [`TokenBucket`](Algorithm::TokenBucket) | `burst` at once, refilled at `limit` per `period` | tokens and time |
/// | [`Gcra`](Algorithm::Gcra) | the same as the token bucket | level and time |
///
/// # What every algorithm promises
///
/// - **Cost.** A request costs a number of units (1 unless the layer says otherwise). A cost that
///   the rule can never hold, more than `limit` for the window algorithms or more than `burst` for
///   the bucket algorithms, is [`Outcome::Never`](crate::Outcome::Never): the answer is a 429
///   without `Retry-After` whose body says retrying will never help. A cost of 0 peeks: it
///   reports the state without consuming anything and writes nothing.
/// - **Denials are free.** A request that is denied (by any rule of its policy) consumes nothing
///   and writes nothing, so an abusive client cannot push its own window forward.
/// - **Rounding.** `retry_after` and `reset_after` are whole microseconds rounded up (and
///   `Retry-After` whole seconds rounded up): a client that waits exactly as long as it was told
///   gets in, unless other requests of its key took the room meanwhile.
/// - **Numbers.** Time is kept in microseconds. Every value the scripts compute is an integer
///   below 2^53, exact in a Lua number; replies are integers only (Redis truncates Lua floats).
///   Periods run from 1 ms ([`MIN_PERIOD`](crate::MIN_PERIOD)) to ten years
///   ([`MAX_PERIOD`](crate::MAX_PERIOD)), limits up to `u32::MAX`; the few quotas that cannot be
///   computed exactly are rejected when the policy is built (see each algorithm).
/// - **Reported numbers.** `remaining` is how many more requests of cost 1 would pass now, `used`
///   how much of the capacity is taken, `reset_after` how long until the full capacity is back
///   (0 when it already is; for the fixed window, the end of the current window, or of the one a
///   request would start), `retry_after` how long until this request would fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Algorithm {
    /// At most `limit` units of cost per window of `period`. A window starts with the first
    /// request a key makes after its previous window ended (not aligned to the clock, so clients
    /// do not all reset at the same instant). Cheap and easy to explain, but a client can spend
    /// up to twice the limit around a window boundary. `reset_after` and a denial's
    /// `retry_after` are the time left in the window.
    FixedWindow,
    /// Exact: at most `limit` units of cost in any interval of `period`. Every admitted unit is
    /// one entry (its time) in a Redis sorted set, or a deque in memory; a request of cost n adds
    /// n entries, and entries older than the period are dropped when the key is next written, so
    /// a key never holds more than `limit` entries. The limit must be at most
    /// [`Algorithm::SLIDING_LOG_MAX_LIMIT`] (10,000): memory grows with it.
    ///
    /// A request is admitted when the entries younger than `period`, plus its cost, fit in
    /// `limit`. When denied, `retry_after` is when the oldest entry that must leave for the
    /// request to fit leaves the window; `reset_after` is when the newest entry leaves.
    SlidingLog,
    /// A sliding window counter (seed 001): the period is split into `sub_intervals` equal
    /// sub-intervals, aligned to the Unix epoch, each with a count of the units admitted in it.
    /// The usage estimate at time `t` is the sum of the counts of the sub-intervals that lie
    /// within `(t - period, t]`, plus the count of the oldest, partially overlapping sub-interval
    /// weighted by the fraction of it that still overlaps. `sub_intervals = 1` is Cloudflare's
    /// weighted previous window; more sub-intervals track a true sliding window more closely, for
    /// `sub_intervals` counts per key. All counts of a key live in one Redis hash.
    ///
    /// The estimate is computed with integers only: the weight is an exact fraction of the
    /// sub-interval (in whole microseconds while `limit` × sub-interval length in µs stays below
    /// 2^52, else in the coarsest steps that keep it there, a few milliseconds for 10^9 per day),
    /// and the weighted count is rounded *up*, so the estimate never admits more than the exact
    /// fraction would. `used` is that estimate, `reset_after` the time until the newest counted
    /// sub-interval has slid out entirely, and `retry_after` the earliest time at which the
    /// request fits, assuming nothing else is admitted meanwhile.
    ///
    /// `sub_intervals` must be 1 to 100 and divide the period into whole microseconds.
    SlidingWindow {
        /// How many sub-intervals the period is split into (1 to 100).
        sub_intervals: u16,
    },
    /// A token bucket (seed 004): it holds up to `burst` tokens, starts full and refills at
    /// `limit` tokens per `period`; a request takes `cost` tokens or is denied. Stored as one
    /// Redis hash (tokens and the time they were counted), updated by one atomic script. It is
    /// the same meter as [`Gcra`](Algorithm::Gcra), kept differently, so the two decide alike.
    ///
    /// Fractional tokens are kept exactly, as integers in units of 1/`period` of a token, with
    /// `limit` and `period` first reduced by their greatest common divisor. `burst` × reduced
    /// period must stay below 2^53 (10^9 per day or 1 per ten years fit easily); a quota beyond
    /// that is rejected when the policy is built. `retry_after` is when enough tokens will have
    /// refilled, `reset_after` when the bucket will be full again.
    TokenBucket,
    /// The generic cell rate algorithm: requests are spaced `period / limit` apart on average, and
    /// up to `burst` may arrive back to back. Kept exactly like the token bucket (same limits on
    /// the quota), stored as one string per key.
    Gcra,
}

impl Algorithm {
    /// The largest limit a [`SlidingLog`](Algorithm::SlidingLog) rule may have: the log keeps one
    /// entry per admitted unit.
    pub const SLIDING_LOG_MAX_LIMIT: u32 = 10_000;

    /// The most sub-intervals a [`SlidingWindow`](Algorithm::SlidingWindow) rule may have.
    pub const MAX_SUB_INTERVALS: u16 = 100;

    /// What identifies a rule's state in storage after its name (see [`StateCode`]).
    pub(crate) fn state_code(self, quota: Quota) -> StateCode {
        StateCode {
            algorithm: self,
            quota,
        }
    }

    /// Whether the quota's burst (rather than its limit) is the capacity clients see.
    pub(crate) const fn uses_burst(self) -> bool {
        matches!(self, Algorithm::Gcra | Algorithm::TokenBucket)
    }
}

/// The part of a storage key (a Redis key name, a memory store rule id) that follows the rule's
/// name: the algorithm and the time base its stored numbers are counted in, so that two rules
/// only ever share state when they read it alike.
///
/// - `fw-<period>` and `log-<period>`: times in µs and units of cost; the period is when they stop
///   counting (and the TTL they were written with).
/// - `sw<n>-<period>`: counts per sub-interval index, in units of `period / n`.
/// - `gcra-<limit>/<period>`: a level in units of 1/period of a request for the rate reduced by
///   its gcd, drained at `limit` units per µs.
/// - `tb<burst>-<limit>/<period>`: the token bucket keeps the tokens left in the same units; how
///   long they take to refill (the state's TTL) depends on the burst too.
///
/// A quota change that alters any of these starts from fresh state under a new key, and the old
/// key expires by its TTL. A new limit for a window algorithm, or a new burst for GCRA, keeps the
/// state, which is read the same and matters exactly as long (a count above a lowered limit, a
/// level above a lowered burst, is simply no room).
///
/// Periods are written in the largest unit that holds them exactly: `d`, `h`, `m`, `s`, `ms` or
/// `us` (`1h`, `90s`, `1500ms`, `3650d`), so each period has one spelling.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StateCode {
    algorithm: Algorithm,
    quota: Quota,
}

impl fmt::Display for StateCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // In whole µs, as the algorithms compute with it (see `Params`).
        let period = Period(crate::clock::micros(self.quota.period()));
        let limit = self.quota.limit();
        match self.algorithm {
            Algorithm::FixedWindow => write!(f, "fw-{period}"),
            Algorithm::SlidingLog => write!(f, "log-{period}"),
            Algorithm::SlidingWindow { sub_intervals } => write!(f, "sw{sub_intervals}-{period}"),
            Algorithm::TokenBucket => write!(f, "tb{}-{limit}/{period}", self.quota.burst()),
            Algorithm::Gcra => write!(f, "gcra-{limit}/{period}"),
        }
    }
}

/// A period in µs, written in the largest unit that divides it.
struct Period(u64);

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 5] = [
            (86_400_000_000, "d"),
            (3_600_000_000, "h"),
            (60_000_000, "m"),
            (1_000_000, "s"),
            (1_000, "ms"),
        ];
        let us = self.0;
        match UNITS.iter().find(|&&(size, _)| us % size == 0) {
            Some(&(size, unit)) => write!(f, "{}{unit}", us / size),
            None => write!(f, "{us}us"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn code(algorithm: Algorithm, quota: Quota) -> String {
        algorithm.state_code(quota).to_string()
    }

    #[test]
    fn state_codes_carry_the_time_base_of_the_state() {
        let quota = Quota::per_hour(100).with_burst(10);
        assert_eq!(code(Algorithm::FixedWindow, quota), "fw-1h");
        assert_eq!(code(Algorithm::SlidingLog, quota), "log-1h");
        let window = Algorithm::SlidingWindow { sub_intervals: 60 };
        assert_eq!(code(window, quota), "sw60-1h");
        assert_eq!(code(Algorithm::TokenBucket, quota), "tb10-100/1h");
        assert_eq!(code(Algorithm::Gcra, quota), "gcra-100/1h");
    }

    #[test]
    fn periods_are_spelled_in_the_largest_exact_unit() {
        let period = |us: u64| Period(us).to_string();
        assert_eq!(period(86_400_000_000), "1d");
        assert_eq!(period(crate::clock::micros(crate::MAX_PERIOD)), "3650d");
        assert_eq!(period(90_000_000), "90s");
        assert_eq!(period(5_400_000_000), "90m");
        assert_eq!(period(1_500_000), "1500ms");
        assert_eq!(period(1_000), "1ms");
        assert_eq!(period(1_000_001), "1000001us");
        // Nanoseconds are below what the algorithms count: the same state, the same code.
        let quota = |period| Quota::new(5, period);
        assert_eq!(
            code(Algorithm::Gcra, quota(Duration::from_nanos(1_000_000_400))),
            code(Algorithm::Gcra, quota(Duration::from_secs(1)))
        );
    }
}
