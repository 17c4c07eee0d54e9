//! How many requests per period: the [`Quota`] value type and the bounds of its period.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// The shortest period a quota may have.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);
/// The longest period a quota may have (ten years; longer windows are indistinguishable from
/// "forever" and would only overflow arithmetic).
pub const MAX_PERIOD: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// The longest a rule may make a request wait ([`Rule::with_max_delay`](crate::Rule::with_max_delay)):
/// a request held longer than a minute outlives the timeouts of most clients and proxies in front
/// of it (nginx's `proxy_read_timeout` is 60 s), which would give up on it after its place in the
/// schedule was spent.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

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
    #[serde(with = "human_duration")]
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

    /// How many requests may arrive back to back. Only the bucket algorithms (token bucket, GCRA)
    /// use it; it defaults to the limit. Window algorithms (fixed window, sliding log, sliding
    /// window) always admit up to `limit` per period.
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

    pub(crate) fn validate(&self, rule: &str) -> Result<(), ConfigError> {
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

/// Serde support for durations written the way people write them: `"10s"`, `"1m"`, `"250ms"`
/// (a quota's period, and in [`option`](human_duration::option) a rule's `max_delay`).
pub(crate) mod human_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(crate) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*duration))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text)
            .map_err(|err| D::Error::custom(format!("invalid duration {text:?}: {err}")))
    }

    /// The same for an optional duration (absent: `None`, with `#[serde(default)]`).
    pub(crate) mod option {
        use std::time::Duration;

        use serde::{Deserializer, Serializer};

        pub(crate) fn serialize<S: Serializer>(
            duration: &Option<Duration>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match duration {
                Some(duration) => super::serialize(duration, serializer),
                None => serializer.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<Duration>, D::Error> {
            super::deserialize(deserializer).map(Some)
        }
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
}
