//! Quotas, rules and policies: *what* is limited, independent of where the state lives.
//!
//! - A [`Quota`] is a number of requests per period, with an optional burst.
//! - A [`Rule`] names a quota and picks the [`Algorithm`] that enforces it. The name identifies the
//!   counter: two layers with rules of the same name and algorithm share their state for a key.
//! - A [`Policy`] is one or more rules checked together, all or nothing.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::headers;

/// The shortest period a quota may have.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);
/// The longest period a quota may have (ten years; longer windows are indistinguishable from
/// "forever" and would only overflow arithmetic).
pub const MAX_PERIOD: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
/// The most rules one policy may hold: they are all checked in one atomic step.
pub const MAX_RULES: usize = 8;

/// How many requests are allowed per period.
///
/// Constructors read the way the quota is spoken: `Quota::per_second(100)` admits 100 requests per
/// second, `Quota::new(5, Duration::from_secs(10))` admits 5 per ten seconds. Zero limits and
/// out-of-range periods are rejected with a [`ConfigError`] when the policy is built.
///
/// ```
/// use std::time::Duration;
/// use tower_redis_ratelimit::Quota;
///
/// let quota = Quota::per_minute(100).with_burst(20);
/// assert_eq!(quota.limit(), 100);
/// assert_eq!(quota.period(), Duration::from_secs(60));
/// assert_eq!(quota.burst(), 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quota {
    limit: u32,
    #[serde(with = "humantime_serde_compat")]
    period: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    burst: Option<u32>,
}

impl Quota {
    /// `limit` requests per `period`.
    pub const fn new(limit: u32, period: Duration) -> Self {
        Self {
            limit,
            period,
            burst: None,
        }
    }

    /// `limit` requests per second.
    pub const fn per_second(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(1))
    }

    /// `limit` requests per minute.
    pub const fn per_minute(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(60))
    }

    /// `limit` requests per hour.
    pub const fn per_hour(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(60 * 60))
    }

    /// `limit` requests per day (24 hours from the key's first request, not a calendar day).
    pub const fn per_day(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(24 * 60 * 60))
    }

    /// How many requests may arrive back to back. Only the bucket algorithms (GCRA, token bucket)
    /// use it; it defaults to the limit. Window algorithms always admit up to `limit` per window.
    pub const fn with_burst(mut self, burst: u32) -> Self {
        self.burst = Some(burst);
        self
    }

    /// The number of requests per period.
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// The period.
    pub const fn period(&self) -> Duration {
        self.period
    }

    /// The burst: the configured one, or the limit.
    pub const fn burst(&self) -> u32 {
        match self.burst {
            Some(burst) => burst,
            None => self.limit,
        }
    }

    fn validate(&self, rule: &str) -> Result<(), ConfigError> {
        if self.limit == 0 {
            return Err(ConfigError::ZeroLimit {
                rule: rule.to_owned(),
            });
        }
        if self.burst == Some(0) {
            return Err(ConfigError::ZeroBurst {
                rule: rule.to_owned(),
            });
        }
        if self.period < MIN_PERIOD || self.period > MAX_PERIOD {
            return Err(ConfigError::PeriodOutOfRange {
                rule: rule.to_owned(),
                period: self.period,
            });
        }
        Ok(())
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} per {}",
            self.limit,
            humantime::format_duration(self.period)
        )?;
        match self.burst {
            Some(burst) if burst != self.limit => write!(f, ", burst {burst}"),
            _ => Ok(()),
        }
    }
}

/// The algorithm that enforces a quota. See `docs/algorithms.md` for what each one promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Algorithm {
    /// At most `limit` requests per window; the window starts with the key's first request.
    FixedWindow,
    /// The generic cell rate algorithm: requests are spaced `period / limit` apart on average, and
    /// up to `burst` may arrive back to back.
    Gcra,
}

impl Algorithm {
    /// The short code used in storage keys, so two algorithms never read each other's state.
    pub(crate) const fn code(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fw",
            Algorithm::Gcra => "gcra",
        }
    }

    /// Whether the quota's burst (rather than its limit) is the capacity clients see.
    pub(crate) const fn uses_burst(self) -> bool {
        matches!(self, Algorithm::Gcra)
    }
}

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

    /// A GCRA rule.
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

    /// The time in which the capacity is granted: the period for window algorithms, the time to
    /// refill the whole burst for bucket algorithms.
    pub(crate) fn window(&self) -> Duration {
        if self.algorithm.uses_burst() {
            self.quota
                .period
                .mul_f64(f64::from(self.quota.burst()) / f64::from(self.quota.limit))
        } else {
            self.quota.period
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
    /// Stable per-rule identities for the memory store (name and algorithm hashed).
    rule_ids: Box<[u64]>,
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
        let rule_ids = rules.iter().map(rule_id).collect();
        let header = headers::policy_header(&rules);
        Ok(Self {
            inner: Arc::new(PolicyInner {
                rules,
                rule_ids,
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

/// The identity of a rule's state: its name and algorithm. SipHash with fixed keys, so the id is
/// stable across processes; 64 bits make an accidental collision between two rule names negligible.
fn rule_id(rule: &Rule) -> u64 {
    let mut hasher = DefaultHasher::new();
    rule.name.hash(&mut hasher);
    rule.algorithm.code().hash(&mut hasher);
    hasher.finish()
}

/// Serde support for periods written the way people write them: `"10s"`, `"1m"`, `"250ms"`.
mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(
        period: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*period))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text)
            .map_err(|err| D::Error::custom(format!("invalid period {text:?}: {err}")))
    }
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
    fn rule_ids_depend_on_name_and_algorithm_only() {
        let a = rule_id(&Rule::gcra("api", Quota::per_second(1)));
        assert_eq!(a, rule_id(&Rule::gcra("api", Quota::per_hour(9))));
        assert_ne!(a, rule_id(&Rule::fixed_window("api", Quota::per_second(1))));
        assert_ne!(a, rule_id(&Rule::gcra("api2", Quota::per_second(1))));
    }
}
