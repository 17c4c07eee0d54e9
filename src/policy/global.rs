//! The *windows* a global policy's one rule is allotted in (see `store::region`): the ledger
//! grants units of one window at a time, each spent inside its window, and meters the grants of
//! consecutive windows as the rule's algorithm would.
//!
//! - A fixed window: one window per period, the window itself (at most the limit in each).
//! - A sliding window: its sub-intervals (any `sub_intervals` consecutive ones hold at most the
//!   limit, as in one region).
//! - GCRA and the token bucket: the period split into `k ≥ ceil(2 × limit / burst)` windows (the
//!   smallest such `k` that divides the period into whole µs), so that a window refills at most
//!   half the burst: a token bucket of the burst, refilled `limit / k` a window, meters the grants,
//!   and quantising the rate into windows costs at most half a burst (`docs/regions.md` has the
//!   bound).

use super::rule::Rule;
use crate::algorithm::Algorithm;
use crate::clock::micros;
use crate::error::ConfigError;

/// The windows per period of `rule` in a global policy, or why it cannot be global.
pub(crate) fn windows(rule: &Rule) -> Result<u32, ConfigError> {
    let quota = rule.quota();
    let invalid = |reason: &'static str| ConfigError::GlobalRule {
        rule: rule.name().to_owned(),
        reason,
    };
    if rule.max_delay().is_some() {
        return Err(invalid(
            "a global rule does not delay requests (each region spends units it holds, now or \
             never): drop its max_delay",
        ));
    }
    match rule.algorithm() {
        Algorithm::FixedWindow => Ok(1),
        Algorithm::SlidingWindow { sub_intervals } => Ok(u32::from(sub_intervals)),
        Algorithm::Gcra | Algorithm::TokenBucket => {
            let period_us = micros(quota.period());
            let (limit, burst) = (u64::from(quota.limit()), u64::from(quota.burst()));
            let fewest = (2 * limit).div_ceil(burst).max(1);
            (fewest..=period_us.min(u64::from(u32::MAX)))
                .find(|windows| period_us % windows == 0)
                .and_then(|windows| u32::try_from(windows).ok())
                .ok_or_else(|| {
                    invalid(
                        "its burst is too small for its rate: a window (the time to refill half \
                         the burst) would be shorter than a microsecond",
                    )
                })
        }
        Algorithm::SlidingLog => Err(invalid(
            "a sliding log keeps every admission's time, which cannot be allotted to regions: \
             use a sliding window, GCRA, a token bucket or a fixed window",
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::quota::Quota;

    #[test]
    fn a_bucket_is_allotted_in_windows_that_refill_at_most_half_its_burst() {
        let windows = |rule: Rule| windows(&rule).unwrap();
        assert_eq!(windows(Rule::fixed_window("a", Quota::per_minute(600))), 1);
        assert_eq!(
            windows(Rule::sliding_window("a", Quota::per_minute(600), 12)),
            12
        );
        // 100 per 4 s, burst 50: 4 windows of 1 s, 25 refilled each.
        let quota = Quota::new(100, Duration::from_secs(4)).with_burst(50);
        assert_eq!(windows(Rule::gcra("a", quota)), 4);
        assert_eq!(windows(Rule::token_bucket("a", quota)), 4);
        // The burst defaults to the limit: two windows a period.
        assert_eq!(windows(Rule::gcra("a", Quota::per_minute(600))), 2);
        // ceil(2 × 60 / 9) = 14 does not divide a second into whole µs; 16 does.
        let quota = Quota::new(60, Duration::from_secs(1)).with_burst(9);
        assert_eq!(windows(Rule::gcra("a", quota)), 16);
    }

    #[test]
    fn a_sliding_log_or_a_delaying_rule_is_not_global() {
        let error = windows(&Rule::sliding_log("a", Quota::per_second(5))).unwrap_err();
        assert!(error.to_string().contains("sliding log"), "{error}");
        let delaying =
            Rule::gcra("a", Quota::per_second(5)).with_max_delay(Duration::from_millis(100));
        let error = windows(&delaying).unwrap_err();
        assert!(error.to_string().contains("max_delay"), "{error}");
    }
}
