//! [`Rule`]: a named quota and the algorithm that enforces it.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::state_code::StateCode;
use crate::algorithm::Algorithm;
use crate::error::ConfigError;
use crate::quota::{MAX_DELAY, Quota};

/// A named quota enforced by an algorithm.
///
/// The name appears in the `RateLimit-Policy` and `RateLimit` headers and in storage keys. It must
/// be 1 to 64 characters of `A-Z a-z 0-9 . _ -`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    name: Arc<str>,
    algorithm: Algorithm,
    quota: Quota,
    /// How long a request over the quota may wait to be served instead of being refused
    /// (bucket algorithms only; see [`Rule::with_max_delay`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::quota::human_duration::option"
    )]
    max_delay: Option<Duration>,
}

impl Rule {
    /// A rule enforcing `quota` with `algorithm`.
    pub fn new(name: impl Into<Arc<str>>, algorithm: Algorithm, quota: Quota) -> Self {
        Self {
            name: name.into(),
            algorithm,
            quota,
            max_delay: None,
        }
    }

    /// Smooths a burst instead of refusing it, as nginx's `limit_req` without `nodelay`: a
    /// request that the rule would refuse now, but that would conform within `max_delay`, is
    /// admitted and waits until then before it is served (its place in the schedule is counted
    /// at once, so the requests after it queue behind it). One that would have to wait longer
    /// is refused as before; its `retry_after` is when it would be admitted (to wait up to
    /// `max_delay` then).
    ///
    /// Only GCRA and token-bucket rules can delay (the window algorithms have no schedule to
    /// take a place in): [`Policy::new`](crate::Policy::new) refuses a `max_delay` on another
    /// algorithm, and one outside 1 ms to [`MAX_DELAY`] (60 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower_redis_ratelimit::{Policy, Quota, Rule};
    ///
    /// // 10 per second back to back, then up to half a second of queue: 5 more wait.
    /// let rule = Rule::gcra("api", Quota::per_second(10)).with_max_delay(Duration::from_millis(500));
    /// assert_eq!(rule.max_delay(), Some(Duration::from_millis(500)));
    /// assert!(Policy::new([rule]).is_ok());
    /// let window = Rule::fixed_window("api", Quota::per_second(10)).with_max_delay(Duration::from_millis(500));
    /// assert!(Policy::new([window]).is_err());
    /// ```
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = Some(max_delay);
        self
    }

    /// A fixed-window rule.
    pub fn fixed_window(name: impl Into<Arc<str>>, quota: Quota) -> Self {
        Self::new(name, Algorithm::FixedWindow, quota)
    }

    /// A sliding-log rule: exactly `quota.limit()` per any interval of `quota.period()`. The limit
    /// must be at most 10,000 ([`Algorithm::SLIDING_LOG_MAX_LIMIT`]); see
    /// [`Algorithm::SlidingLog`].
    pub fn sliding_log(name: impl Into<Arc<str>>, quota: Quota) -> Self {
        Self::new(name, Algorithm::SlidingLog, quota)
    }

    /// A sliding-window-counter rule with the period split into `sub_intervals` (1 to 100, dividing
    /// the period into whole microseconds); see [`Algorithm::SlidingWindow`].
    pub fn sliding_window(name: impl Into<Arc<str>>, quota: Quota, sub_intervals: u16) -> Self {
        Self::new(name, Algorithm::SlidingWindow { sub_intervals }, quota)
    }

    /// A token-bucket rule: `quota.burst()` tokens, refilled at `quota.limit()` per
    /// `quota.period()`; see [`Algorithm::TokenBucket`].
    pub fn token_bucket(name: impl Into<Arc<str>>, quota: Quota) -> Self {
        Self::new(name, Algorithm::TokenBucket, quota)
    }

    /// A GCRA rule; see [`Algorithm::Gcra`].
    pub fn gcra(name: impl Into<Arc<str>>, quota: Quota) -> Self {
        Self::new(name, Algorithm::Gcra, quota)
    }

    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The rule's name, shared: labels that outlive a request take a reference count, not a copy.
    #[cfg(feature = "metrics")]
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// How long a request over the quota may wait to be served, if the rule delays (see
    /// [`Rule::with_max_delay`]).
    pub fn max_delay(&self) -> Option<Duration> {
        self.max_delay
    }

    /// How many requests of cost 1 past the burst a rule with a `max_delay` admits to wait, from
    /// an empty bucket: `max_delay` × the rate, rounded down (0 without a delay). A cost above
    /// the burst plus this can never pass.
    pub(crate) fn queued(&self) -> u64 {
        let Some(max_delay) = self.max_delay.filter(|_| self.algorithm.uses_burst()) else {
            return 0;
        };
        let units = max_delay.as_micros() * u128::from(self.quota.limit());
        u64::try_from(units / self.quota.period().as_micros()).unwrap_or(u64::MAX)
    }

    /// The number of requests a client can see as its allowance: the burst for bucket algorithms,
    /// the limit for window algorithms ([`Decision::limit`](crate::Decision::limit) of a decision
    /// this rule reports).
    pub fn capacity(&self) -> u32 {
        if self.algorithm.uses_burst() {
            self.quota.burst()
        } else {
            self.quota.limit()
        }
    }

    /// What identifies the rule's state after its name, in Redis key names and the memory store's
    /// rule ids alike: the algorithm and the time base of its state, e.g. `sw60-1h` or
    /// `gcra-10/1s` (see `StateCode`).
    pub(crate) fn state_code(&self) -> StateCode {
        StateCode::new(self.algorithm, self.quota)
    }

    /// The time in which the capacity is granted: the period for window algorithms, the time to
    /// refill the whole burst for bucket algorithms.
    pub(crate) fn window(&self) -> Duration {
        if self.algorithm.uses_burst() {
            self.quota
                .period()
                .mul_f64(f64::from(self.quota.burst()) / f64::from(self.quota.limit()))
        } else {
            self.quota.period()
        }
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        validate_name(&self.name)?;
        self.quota.validate(&self.name)?;
        match self.max_delay {
            Some(_) if !self.algorithm.uses_burst() => Err(ConfigError::DelayNotScheduled {
                rule: self.name.to_string(),
            }),
            Some(max_delay) if max_delay < Duration::from_millis(1) || max_delay > MAX_DELAY => {
                Err(ConfigError::MaxDelayOutOfRange {
                    rule: self.name.to_string(),
                    max_delay,
                    max: MAX_DELAY,
                })
            }
            _ => Ok(()),
        }
    }
}

/// Checks a rule's or a concurrency limit's name: 1 to 64 characters of `A-Z a-z 0-9 . _ -`,
/// which header values and storage keys can hold as they are.
pub(crate) fn validate_name(name: &str) -> Result<(), ConfigError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(valid_char) {
        return Err(ConfigError::InvalidRuleName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_rules_advertise_their_burst_over_the_refill_time() {
        let rule = Rule::gcra("api", Quota::per_minute(100).with_burst(10));
        assert_eq!(rule.capacity(), 10);
        assert_eq!(rule.window(), Duration::from_secs(6));
        let rule = Rule::token_bucket("api", Quota::per_minute(100).with_burst(10));
        assert_eq!(
            (rule.capacity(), rule.window()),
            (10, Duration::from_secs(6))
        );
        for rule in [
            Rule::sliding_log("api", Quota::per_minute(100).with_burst(10)),
            Rule::sliding_window("api", Quota::per_minute(100).with_burst(10), 6),
        ] {
            assert_eq!(
                (rule.capacity(), rule.window()),
                (100, Duration::from_secs(60))
            );
        }
        let rule = Rule::fixed_window("api", Quota::per_minute(100).with_burst(10));
        assert_eq!(rule.capacity(), 100);
        assert_eq!(rule.window(), Duration::from_secs(60));
    }

    #[test]
    fn a_delaying_rule_queues_its_delay_times_its_rate_and_round_trips_through_serde() {
        let rule = Rule::gcra("api", Quota::new(3, Duration::from_secs(10)))
            .with_max_delay(Duration::from_secs(7));
        // 7 s at 0.3 per second: 2.1, rounded down.
        assert_eq!(rule.queued(), 2);
        assert_eq!(Rule::gcra("api", Quota::per_second(3)).queued(), 0);
        let text = serde_json::to_string(&rule).unwrap();
        assert!(text.contains(r#""max_delay":"7s""#), "{text}");
        assert_eq!(serde_json::from_str::<Rule>(&text).unwrap(), rule);
        let plain = serde_json::to_string(&Rule::gcra("api", Quota::per_second(3))).unwrap();
        assert!(!plain.contains("max_delay"), "{plain}");
    }

    #[test]
    fn quotas_round_trip_through_serde_with_human_periods() {
        let rule: Rule = serde_json::from_str(
            r#"{"name":"api","algorithm":"gcra","quota":{"limit":5,"period":"10s","burst":2}}"#,
        )
        .unwrap();
        assert_eq!(
            rule,
            Rule::gcra("api", Quota::new(5, Duration::from_secs(10)).with_burst(2))
        );
        let text = serde_json::to_string(&rule).unwrap();
        assert!(text.contains(r#""period":"10s""#), "{text}");
    }

    #[test]
    fn every_algorithm_round_trips_through_serde() {
        let quota = Quota::per_minute(60);
        for (rule, json) in [
            (Rule::fixed_window("a", quota), r#""fixed_window""#),
            (Rule::sliding_log("a", quota), r#""sliding_log""#),
            (
                Rule::sliding_window("a", quota, 6),
                r#"{"sliding_window":{"sub_intervals":6}}"#,
            ),
            (Rule::token_bucket("a", quota), r#""token_bucket""#),
            (Rule::gcra("a", quota), r#""gcra""#),
        ] {
            let text = serde_json::to_string(&rule).unwrap();
            assert!(text.contains(&format!(r#""algorithm":{json}"#)), "{text}");
            assert_eq!(serde_json::from_str::<Rule>(&text).unwrap(), rule);
        }
    }
}
