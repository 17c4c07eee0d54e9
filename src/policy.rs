//! Quotas, rules and policies: *what* is limited, independent of where the state lives.
//!
//! - A [`Quota`] is a number of requests per period, with an optional burst.
//! - A [`Rule`] names a quota and picks the [`Algorithm`] that enforces it. The name identifies the
//!   counter: two layers with rules of the same name and algorithm share their state for a key, as
//!   long as their quotas count it alike (the same period; for the bucket algorithms the same
//!   rate; for the sliding window the same sub-intervals; for the token bucket the same burst).
//!   Changing those under the same name starts fresh state; changing a window's limit or GCRA's
//!   burst keeps it.
//! - A [`Policy`] is one or more rules checked together, all or nothing.

mod algorithm;
mod quota;

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use serde::{Deserialize, Serialize};

pub use self::algorithm::Algorithm;
pub use self::quota::{MAX_PERIOD, MIN_PERIOD, Quota};
use crate::algorithm::Params;
use crate::error::ConfigError;
use crate::headers;

/// The most rules one policy may hold: they are all checked in one atomic step.
pub const MAX_RULES: usize = 8;

/// A named quota enforced by an algorithm.
///
/// The name appears in the `RateLimit-Policy` and `RateLimit` headers and in storage keys. It must
/// be 1 to 64 characters of `A-Z a-z 0-9 . _ -`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    name: Arc<str>,
    algorithm: Algorithm,
    quota: Quota,
}

impl Rule {
    /// A rule enforcing `quota` with `algorithm`.
    pub fn new(name: impl Into<Arc<str>>, algorithm: Algorithm, quota: Quota) -> Self {
        Self {
            name: name.into(),
            algorithm,
            quota,
        }
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

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The number of requests a client can see as its allowance: the burst for bucket algorithms,
    /// the limit for window algorithms.
    pub(crate) fn capacity(&self) -> u32 {
        if self.algorithm.uses_burst() {
            self.quota.burst()
        } else {
            self.quota.limit()
        }
    }

    /// What identifies the rule's state after its name, in Redis key names and the memory store's
    /// rule ids alike: the algorithm and the time base of its state, e.g. `sw60-1h` or
    /// `gcra-10/1s` (see `StateCode`).
    pub(crate) fn state_code(&self) -> algorithm::StateCode {
        self.algorithm.state_code(self.quota)
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

    fn validate(&self) -> Result<(), ConfigError> {
        validate_name(&self.name)?;
        self.quota.validate(&self.name)
    }
}

pub(crate) fn validate_name(name: &str) -> Result<(), ConfigError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(valid_char) {
        return Err(ConfigError::InvalidRuleName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// One or more rules enforced together on the same key.
///
/// A request is admitted only if every rule admits it, and a denied request consumes none of them.
/// Built with [`Policy::new`], which validates every rule, or from a single rule with
/// `Policy::try_from(rule)`.
///
/// ```
/// use tower_redis_ratelimit::{Policy, Quota, Rule};
///
/// let policy = Policy::new([
///     Rule::gcra("per-second", Quota::per_second(10)),
///     Rule::fixed_window("per-hour", Quota::per_hour(1_000)),
/// ])?;
/// assert_eq!(policy.rules().len(), 2);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Policy {
    inner: Arc<PolicyInner>,
}

struct PolicyInner {
    rules: Box<[Rule]>,
    /// Stable per-rule identities for the memory store (name and state code hashed).
    rule_ids: Box<[u64]>,
    /// Each rule's parameters as the algorithms compute with them, validated once here.
    params: Box<[Params]>,
    /// The `RateLimit-Policy` header, serialized once.
    header: HeaderValue,
}

impl Policy {
    /// A policy of the given rules, validated.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Result<Self, ConfigError> {
        let rules: Box<[Rule]> = rules.into_iter().collect();
        if rules.is_empty() {
            return Err(ConfigError::EmptyPolicy);
        }
        if rules.len() > MAX_RULES {
            return Err(ConfigError::TooManyRules {
                count: rules.len(),
                max: MAX_RULES,
            });
        }
        for (index, rule) in rules.iter().enumerate() {
            rule.validate()?;
            if rules[..index]
                .iter()
                .any(|earlier| earlier.name == rule.name)
            {
                return Err(ConfigError::DuplicateRuleName {
                    name: rule.name.to_string(),
                });
            }
        }
        let params = rules
            .iter()
            .map(Params::new)
            .collect::<Result<Box<[Params]>, ConfigError>>()?;
        let rule_ids = rules.iter().map(rule_id).collect();
        let header = headers::policy_header(&rules);
        Ok(Self {
            inner: Arc::new(PolicyInner {
                rules,
                rule_ids,
                params,
                header,
            }),
        })
    }

    /// The rules, in the order they were given.
    pub fn rules(&self) -> &[Rule] {
        &self.inner.rules
    }

    pub(crate) fn rule_ids(&self) -> &[u64] {
        &self.inner.rule_ids
    }

    /// Each rule's parameters, in rule order.
    pub(crate) fn params(&self) -> &[Params] {
        &self.inner.params
    }

    pub(crate) fn header(&self) -> &HeaderValue {
        &self.inner.header
    }
}

impl TryFrom<Rule> for Policy {
    type Error = ConfigError;

    fn try_from(rule: Rule) -> Result<Self, ConfigError> {
        Policy::new([rule])
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.inner.rules)
            .finish()
    }
}

impl PartialEq for Policy {
    fn eq(&self, other: &Self) -> bool {
        self.inner.rules == other.inner.rules
    }
}

/// The identity of a rule's state in the memory store: what names its key in Redis, the rule's
/// name and state code (see [`Rule::state_code`]), so both stores start fresh state for the same
/// quota changes. SipHash with fixed keys, so the id is stable across processes; 64 bits make an
/// accidental collision between two rules negligible.
fn rule_id(rule: &Rule) -> u64 {
    let mut hasher = DefaultHasher::new();
    rule.name.hash(&mut hasher);
    rule.state_code().to_string().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_mean_what_they_say() {
        assert_eq!(Quota::per_second(100).limit(), 100);
        assert_eq!(Quota::per_second(100).period(), Duration::from_secs(1));
        assert_eq!(Quota::per_hour(3).period(), Duration::from_secs(3600));
        assert_eq!(Quota::per_day(3).period(), Duration::from_secs(86_400));
        assert_eq!(Quota::per_minute(7).burst(), 7);
        assert_eq!(Quota::per_minute(7).with_burst(2).burst(), 2);
    }

    #[test]
    fn invalid_quotas_are_rejected_with_the_rule_name() {
        let err = Policy::try_from(Rule::gcra("api", Quota::per_second(0))).unwrap_err();
        assert_eq!(err, ConfigError::ZeroLimit { rule: "api".into() });
        let err =
            Policy::try_from(Rule::gcra("api", Quota::per_second(1).with_burst(0))).unwrap_err();
        assert_eq!(err, ConfigError::ZeroBurst { rule: "api".into() });
        let err = Policy::try_from(Rule::gcra("api", Quota::new(1, Duration::from_micros(10))))
            .unwrap_err();
        assert!(matches!(err, ConfigError::PeriodOutOfRange { .. }));
        let err = Policy::try_from(Rule::gcra("has space", Quota::per_second(1))).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidRuleName { .. }));
        let err = Policy::try_from(Rule::gcra("{tag}", Quota::per_second(1))).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidRuleName { .. }));
        assert_eq!(Policy::new([]).unwrap_err(), ConfigError::EmptyPolicy);
        let twice = [
            Rule::gcra("a", Quota::per_second(1)),
            Rule::fixed_window("a", Quota::per_hour(5)),
        ];
        assert!(matches!(
            Policy::new(twice).unwrap_err(),
            ConfigError::DuplicateRuleName { .. }
        ));
    }

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

    #[test]
    fn quotas_display_as_spoken() {
        assert_eq!(
            Quota::new(5, Duration::from_secs(10)).to_string(),
            "5 per 10s"
        );
        assert_eq!(Quota::per_minute(3).with_burst(3).to_string(), "3 per 1m");
        assert_eq!(
            Quota::per_minute(100).with_burst(10).to_string(),
            "100 per 1m, burst 10"
        );
    }

    #[test]
    fn rule_ids_change_with_what_gives_the_state_its_meaning() {
        let a = rule_id(&Rule::gcra("api", Quota::per_second(1)));
        assert_ne!(a, rule_id(&Rule::fixed_window("api", Quota::per_second(1))));
        assert_ne!(a, rule_id(&Rule::gcra("api2", Quota::per_second(1))));
        // A bucket's level is counted in units of its rate: a new rate is fresh state, a new
        // burst is not for GCRA; a token bucket's tokens take longer to refill under a larger
        // burst, so there it is.
        assert_ne!(a, rule_id(&Rule::gcra("api", Quota::per_second(2))));
        assert_ne!(a, rule_id(&Rule::gcra("api", Quota::per_minute(1))));
        assert_eq!(
            a,
            rule_id(&Rule::gcra("api", Quota::per_second(1).with_burst(5)))
        );
        let tb = |quota| rule_id(&Rule::token_bucket("api", quota));
        assert_ne!(tb(Quota::per_second(1)), tb(Quota::per_second(2)));
        assert_ne!(
            tb(Quota::per_second(1)),
            tb(Quota::per_second(1).with_burst(5))
        );
        // A window's state keeps its meaning under a new limit, not under a new period or new
        // sub-intervals.
        let window = |quota, n| rule_id(&Rule::sliding_window("api", quota, n));
        let w = window(Quota::per_minute(3), 60);
        assert_eq!(w, window(Quota::per_minute(5), 60));
        assert_ne!(w, window(Quota::per_hour(3), 60));
        assert_ne!(w, window(Quota::per_minute(3), 30));
        let fixed = |quota| rule_id(&Rule::fixed_window("api", quota));
        assert_eq!(fixed(Quota::per_hour(5)), fixed(Quota::per_hour(2)));
        assert_ne!(fixed(Quota::per_hour(5)), fixed(Quota::per_day(5)));
        let log = |quota| rule_id(&Rule::sliding_log("api", quota));
        assert_eq!(log(Quota::per_hour(5)), log(Quota::per_hour(2)));
        assert_ne!(log(Quota::per_hour(5)), log(Quota::per_day(5)));
    }
}
