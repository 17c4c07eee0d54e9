//! Which algorithm enforces a quota, and what each one promises: the public [`Algorithm`]
//! (re-exported from [`policy`](crate::policy)). The state transitions are this module's other
//! files and `lua/`.

use serde::{Deserialize, Serialize};

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
///   the bucket algorithms, is [`Outcome::Never`](crate::decision::Outcome::Never): the answer is a 429
///   without `Retry-After` whose body says retrying will never help. A cost of 0 peeks: it
///   reports the state without consuming anything and writes nothing.
/// - **Denials are free.** A request that is denied (by any rule of its policy) consumes nothing
///   and writes nothing, so an abusive client cannot push its own window forward.
/// - **Rounding.** `retry_after` and `full_after` are whole microseconds rounded up (and
///   `Retry-After` whole seconds rounded up): a client that waits exactly as long as it was told
///   gets in, unless other requests of its key took the room meanwhile.
/// - **Numbers.** Time is kept in microseconds. Every value the scripts compute is an integer
///   below 2^53, exact in a Lua number; replies are integers only (Redis truncates Lua floats).
///   Periods run from 1 ms ([`MIN_PERIOD`](crate::policy::MIN_PERIOD)) to ten years
///   ([`MAX_PERIOD`](crate::policy::MAX_PERIOD)), limits up to `u32::MAX`; the few quotas that cannot be
///   computed exactly are rejected when the policy is built (see each algorithm).
/// - **Reported numbers.** `remaining` is how many more requests of cost 1 would pass now, `used`
///   how much of the capacity is taken, `full_after` how long until the full capacity is back
///   (0 when it already is; for the fixed window, the end of the current window, or of the one a
///   request would start), `retry_after` how long until this request would fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Algorithm {
    /// At most `limit` units of cost per window of `period`. A window starts with the first
    /// request a key makes after its previous window ended (not aligned to the clock, so clients
    /// do not all reset at the same instant). Cheap and easy to explain, but a client can spend
    /// up to twice the limit around a window boundary. `full_after` and a denial's
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
    /// request to fit leaves the window; `full_after` is when the newest entry leaves.
    SlidingLog,
    /// A sliding window counter: the period is split into `sub_intervals` equal
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
    /// fraction would. `used` is that estimate, `full_after` the time until the newest counted
    /// sub-interval has slid out entirely, and `retry_after` the earliest time at which the
    /// request fits, assuming nothing else is admitted meanwhile.
    ///
    /// `sub_intervals` must be 1 to 100 and divide the period into whole microseconds.
    SlidingWindow {
        /// How many sub-intervals the period is split into (1 to 100).
        sub_intervals: u16,
    },
    /// A token bucket (as in Stripe's rate limiters): it holds up to `burst` tokens, starts full and refills at
    /// `limit` tokens per `period`; a request takes `cost` tokens or is denied. Stored as one
    /// Redis hash (tokens and the time they were counted), updated by one atomic script. It is
    /// the same meter as [`Gcra`](Algorithm::Gcra), kept differently, so the two decide alike.
    ///
    /// Fractional tokens are kept exactly, as integers in units of 1/`period` of a token, with
    /// `limit` and `period` first reduced by their greatest common divisor. `burst` × reduced
    /// period must stay below 2^53 (10^9 per day or 1 per ten years fit easily); a quota beyond
    /// that is rejected when the policy is built. `retry_after` is when enough tokens will have
    /// refilled, `full_after` when the bucket will be full again.
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

    /// The algorithms' names in configuration files: serde's names of the variants.
    #[cfg(feature = "config")]
    pub const NAMES: [&'static str; 5] = [
        "fixed_window",
        "sliding_log",
        "sliding_window",
        "token_bucket",
        "gcra",
    ];

    /// The algorithm's name, as serde writes it.
    #[cfg(feature = "config")]
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingWindow { .. } => "sliding_window",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
        }
    }

    /// The algorithm named `name` (see [`NAMES`](Self::NAMES)); a sliding window has
    /// `sub_intervals`.
    #[cfg(feature = "config")]
    pub fn named(name: &str, sub_intervals: u16) -> Option<Algorithm> {
        Some(match name {
            "fixed_window" => Algorithm::FixedWindow,
            "sliding_log" => Algorithm::SlidingLog,
            "sliding_window" => Algorithm::SlidingWindow { sub_intervals },
            "token_bucket" => Algorithm::TokenBucket,
            "gcra" => Algorithm::Gcra,
            _ => return None,
        })
    }

    /// Whether the quota's burst (rather than its limit) is the capacity clients see.
    pub(crate) const fn uses_burst(self) -> bool {
        matches!(self, Algorithm::Gcra | Algorithm::TokenBucket)
    }
}

#[cfg(all(test, feature = "config"))]
mod tests {
    use super::Algorithm;

    /// The names configuration files use are serde's: a unit variant serializes as its name.
    #[test]
    fn names_are_serdes() {
        for name in Algorithm::NAMES {
            let algorithm = Algorithm::named(name, 60).unwrap();
            assert_eq!(algorithm.name(), name);
            let serialized = serde_json::to_value(algorithm).unwrap();
            let serde_name = match &serialized {
                serde_json::Value::String(name) => name.clone(),
                serde_json::Value::Object(map) => map.keys().next().unwrap().clone(),
                other => panic!("{other}"),
            };
            assert_eq!(serde_name, name);
        }
        assert_eq!(Algorithm::named("leaky", 60), None);
    }
}
