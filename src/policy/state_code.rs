//! The part of a storage key that follows a rule's name: the algorithm and the time base of its
//! state.

use std::fmt;

use crate::algorithm::Algorithm;
use crate::quota::Quota;

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

impl StateCode {
    /// The code of a rule enforcing `quota` with `algorithm`.
    pub(crate) fn new(algorithm: Algorithm, quota: Quota) -> Self {
        Self { algorithm, quota }
    }
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
        StateCode::new(algorithm, quota).to_string()
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
        assert_eq!(
            period(crate::clock::micros(crate::quota::MAX_PERIOD)),
            "3650d"
        );
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
