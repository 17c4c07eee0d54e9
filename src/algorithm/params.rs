//! A rule's parameters as the algorithms and the scripts compute with them, checked once when a
//! policy is built so that every number a decision computes stays an exact integer below 2^53
//! (the scripts' doubles hold those exactly; the algorithms' `i64` hold them with room to spare).

use std::time::Duration;

use super::{Algorithm, arith, sliding_window};
use crate::error::ConfigError;
use crate::quota::{MAX_DELAY, Quota};

/// The largest integer below 2^53: every integer up to it is exact in a double (a Lua number).
const MAX_EXACT: u64 = arith::MAX_EXACT as u64;

/// A rule's parameters as the scripts receive them: integers, time in microseconds. Each fits in
/// 49 bits (a limit or burst is a `u32`, a period at most ten years, about 3.2e14 µs, below 2^49).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Params {
    pub(crate) algorithm: Algorithm,
    /// Units of cost per period. For the bucket algorithms, `limit` and `period` are divided by
    /// their greatest common divisor: only the rate matters there, and the smaller period keeps
    /// the scaled bucket levels small.
    pub(crate) limit: i64,
    /// The period in µs (reduced for the bucket algorithms, see `limit`).
    pub(crate) period: i64,
    pub(crate) burst: i64,
    /// The algorithm's own parameter: the sliding window's sub-intervals; for the bucket
    /// algorithms, how far (units) a level may pass the capacity to admit a request that then
    /// waits until it conforms: `max_delay` (µs) × `limit`, 0 for a rule that never delays.
    pub(crate) extra: i64,
    /// The sliding window's sub-intervals as its steps measure them, from the numbers above
    /// (the scripts derive it on every call); all zero for the other algorithms.
    pub(crate) window: sliding_window::Geometry,
}

impl Params {
    /// The parameters of rule `name`, enforcing `quota` (already validated: non-zero limit and
    /// burst, a period from 1 ms to 10 years) with `algorithm`; rejects what the algorithm cannot
    /// compute exactly.
    pub(crate) fn new(name: &str, algorithm: Algorithm, quota: Quota) -> Result<Self, ConfigError> {
        let limit = u64::from(quota.limit());
        // At most ten years: about 3.2e14 µs.
        let period = crate::clock::micros(quota.period());
        let burst = u64::from(quota.burst());
        let (limit, period, extra) = match algorithm {
            Algorithm::FixedWindow => (limit, period, 0),
            Algorithm::SlidingLog => {
                if quota.limit() > Algorithm::SLIDING_LOG_MAX_LIMIT {
                    return Err(ConfigError::SlidingLogTooLong {
                        rule: name.to_owned(),
                        limit: quota.limit(),
                        max: Algorithm::SLIDING_LOG_MAX_LIMIT,
                    });
                }
                (limit, period, 0)
            }
            Algorithm::SlidingWindow { sub_intervals } => {
                let n = u64::from(sub_intervals);
                if n == 0 || sub_intervals > Algorithm::MAX_SUB_INTERVALS || period % n != 0 {
                    return Err(ConfigError::InvalidSubIntervals {
                        rule: name.to_owned(),
                        sub_intervals,
                        period: quota.period(),
                    });
                }
                (limit, period, n)
            }
            Algorithm::TokenBucket | Algorithm::Gcra => {
                let divisor = gcd(limit, period);
                let (limit, period) = (limit / divisor, period / divisor);
                // The largest level is burst × period: it must stay exact.
                let max = MAX_EXACT / period;
                if burst > max {
                    return Err(ConfigError::BurstTooLarge {
                        rule: name.to_owned(),
                        burst: quota.burst(),
                        max,
                    });
                }
                (limit, period, 0)
            }
        };
        // Each is at most a u32 or ten years of µs: far inside an i64.
        let int = |x: u64| i64::try_from(x).expect("validated quota");
        let (limit, period, burst, extra) = (int(limit), int(period), int(burst), int(extra));
        let window = match algorithm {
            Algorithm::SlidingWindow { .. } => sliding_window::Geometry::new(limit, period, extra),
            _ => sliding_window::Geometry::default(),
        };
        Ok(Self {
            algorithm,
            limit,
            period,
            burst,
            extra,
            window,
        })
    }

    /// The same parameters for rule `name` with a `max_delay` (already validated: 1 ms to
    /// `MAX_DELAY`, on a bucket rule): its horizon, which must keep every level exact.
    pub(crate) fn delaying(
        mut self,
        name: &str,
        max_delay: Option<Duration>,
    ) -> Result<Self, ConfigError> {
        let Some(max_delay) = max_delay.filter(|_| self.algorithm.uses_burst()) else {
            return Ok(self);
        };
        let capacity = self.burst * self.period;
        // The longest delay whose levels stay exact: capacity + delay × limit below 2^53.
        let most = (arith::MAX_EXACT - capacity) / self.limit;
        let delay = i64::try_from(crate::clock::micros(max_delay)).unwrap_or(i64::MAX);
        if delay > most {
            return Err(ConfigError::MaxDelayOutOfRange {
                rule: name.to_owned(),
                max_delay,
                max: Duration::from_micros(most.max(0) as u64).min(MAX_DELAY),
            });
        }
        self.extra = delay * self.limit;
        Ok(self)
    }

    /// The algorithm's id in `lua/decide.lua`.
    #[cfg(feature = "redis")]
    pub(crate) fn script_id(&self) -> u8 {
        match self.algorithm {
            Algorithm::FixedWindow => 1,
            Algorithm::Gcra => 2,
            Algorithm::SlidingLog => 3,
            Algorithm::SlidingWindow { .. } => 4,
            Algorithm::TokenBucket => 5,
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::MAX_PERIOD;

    #[test]
    fn bucket_rates_are_reduced_so_realistic_quotas_stay_exact() {
        // 10^9 per day: gcd(10^9, 8.64e10) = 2e8, so one request is 432 units, 5 drain per µs.
        let params = Params::new("a", Algorithm::Gcra, Quota::per_day(1_000_000_000)).unwrap();
        assert_eq!((params.limit, params.period), (5, 432));
        assert!(params.burst * params.period < MAX_EXACT as i64);
        // One per ten years, and the same with a token bucket.
        let params = Params::new("a", Algorithm::TokenBucket, Quota::new(1, MAX_PERIOD)).unwrap();
        assert_eq!(params.period, MAX_PERIOD.as_micros() as i64);
        // Window algorithms keep the quota as it is.
        let params = Params::new("a", Algorithm::FixedWindow, Quota::per_day(1_000)).unwrap();
        assert_eq!((params.limit, params.period), (1_000, 86_400_000_000));
    }

    #[test]
    fn a_burst_that_cannot_be_counted_exactly_is_rejected_with_the_largest_that_can() {
        // A prime-ish rate: 1 per (ten years - 1 µs) cannot be reduced.
        let period = MAX_PERIOD - Duration::from_micros(1);
        let period_us = period.as_micros() as u64;
        let max = MAX_EXACT / period_us;
        let fits = (
            "a",
            Algorithm::TokenBucket,
            Quota::new(1, period).with_burst(max as u32),
        );
        assert!(Params::new(fits.0, fits.1, fits.2).is_ok());
        let too_big = (
            "a",
            Algorithm::Gcra,
            Quota::new(1, period).with_burst(max as u32 + 1),
        );
        assert_eq!(
            Params::new(too_big.0, too_big.1, too_big.2).unwrap_err(),
            ConfigError::BurstTooLarge {
                rule: "a".into(),
                burst: max as u32 + 1,
                max,
            }
        );
    }

    #[test]
    fn sliding_logs_are_bounded_and_sub_intervals_must_divide_the_period() {
        assert!(Params::new("a", Algorithm::SlidingLog, Quota::per_hour(10_000)).is_ok());
        assert!(matches!(
            Params::new("a", Algorithm::SlidingLog, Quota::per_hour(10_001)),
            Err(ConfigError::SlidingLogTooLong {
                limit: 10_001,
                max: 10_000,
                ..
            })
        ));
        let window = |period: Duration, n: u16| {
            Params::new(
                "a",
                Algorithm::SlidingWindow { sub_intervals: n },
                Quota::new(5, period),
            )
        };
        assert_eq!(window(Duration::from_secs(60), 60).unwrap().extra, 60);
        assert_eq!(window(Duration::from_secs(1), 100).unwrap().extra, 100);
        assert!(window(Duration::from_millis(1), 1).is_ok());
        for (period, n) in [
            (Duration::from_secs(60), 0),
            (Duration::from_secs(60), 101),
            // 1 s / 7 is not a whole number of microseconds.
            (Duration::from_secs(1), 7),
        ] {
            assert!(
                matches!(
                    window(period, n),
                    Err(ConfigError::InvalidSubIntervals { .. })
                ),
                "{period:?} / {n}"
            );
        }
    }

    #[test]
    fn a_delay_is_a_horizon_of_units_past_the_capacity_kept_exact() {
        let of = |algorithm, quota, delay| {
            Params::new("a", algorithm, quota).and_then(|params| params.delaying("a", delay))
        };
        // 10 per second: gcd(10, 1e6) = 10, so 1 unit drains per µs and a request is 100_000.
        let half_second = Some(Duration::from_millis(500));
        let params = of(Algorithm::Gcra, Quota::per_second(10), half_second).unwrap();
        assert_eq!(
            (params.limit, params.period, params.extra),
            (1, 100_000, 500_000)
        );
        let params = of(Algorithm::Gcra, Quota::per_second(10), None).unwrap();
        assert_eq!(params.extra, 0);
        // 4_294_967_291 (a prime) per ms: 4.3e9 units drain per µs, so 60 s would pass 2^53.
        let fast = Quota::new(4_294_967_291, Duration::from_millis(1));
        let minute = Some(Duration::from_secs(60));
        let Err(ConfigError::MaxDelayOutOfRange { max, .. }) =
            of(Algorithm::TokenBucket, fast, minute)
        else {
            panic!("a delay past exact levels must be refused");
        };
        assert!(
            max < Duration::from_secs(3) && max > Duration::from_secs(2),
            "{max:?}"
        );
    }

    #[cfg(feature = "redis")]
    #[test]
    fn every_algorithm_has_its_own_script_id() {
        let ids: std::collections::BTreeSet<u8> = [
            ("a", Algorithm::FixedWindow, Quota::per_second(1)),
            ("a", Algorithm::Gcra, Quota::per_second(1)),
            ("a", Algorithm::SlidingLog, Quota::per_second(1)),
            (
                "a",
                Algorithm::SlidingWindow { sub_intervals: 10 },
                Quota::per_second(1),
            ),
            ("a", Algorithm::TokenBucket, Quota::per_second(1)),
        ]
        .iter()
        .map(|&(name, algorithm, quota)| Params::new(name, algorithm, quota).unwrap().script_id())
        .collect();
        assert_eq!(ids.len(), 5);
    }
}
