//! [`ConfigError`]: a configuration mistake, reported when a layer, policy or store is built,
//! and the errors of each concern it holds: [`StoreConfigError`], [`KeyConfigError`],
//! [`ShedConfigError`] and [`ConcurrencyConfigError`].
//!
//! Every error prints as its message, with `{:?}` too, so that `main` returning one (whose
//! `Err` is printed with `{:?}`) shows the message rather than the variants' fields; match on the
//! variants to tell mistakes apart.

mod concurrency;
mod key;
#[cfg(feature = "config")]
mod setting;
mod shed;
mod store;

use std::time::Duration;

pub use self::concurrency::ConcurrencyConfigError;
pub use self::key::KeyConfigError;
#[cfg(feature = "config")]
pub use self::setting::SettingError;
pub use self::shed::ShedConfigError;
pub use self::store::StoreConfigError;

/// A configuration mistake, reported by `build()` or [`Policy::new`](crate::Policy::new) before any
/// request is served.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A policy needs at least one rule.
    #[error(
        "a rate-limit policy needs at least one rule: add one with `.rule(...)` or pass a `Policy`"
    )]
    EmptyPolicy,
    /// A policy has more rules than can be checked in one atomic step.
    #[error("a policy may hold at most {max} rules, this one has {count}")]
    TooManyRules {
        /// How many rules were given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// A rule that a global policy (one quota for every region, see
    /// [`Policy::global`](crate::Policy::global)) cannot hold: a sliding log, a rule with a
    /// `max_delay`, or a bucket whose windows would be shorter than a microsecond.
    #[error("rule {rule:?} cannot be a global policy's: {reason}")]
    GlobalRule {
        /// The rule's name.
        rule: String,
        /// Why.
        reason: &'static str,
    },
    /// A global policy given more rules than its one.
    #[error(
        "a global policy holds one rule, this one {count}: limit the other rules with a layer \
         of their own"
    )]
    GlobalRules {
        /// How many rules were given.
        count: usize,
    },
    /// Two rules of one policy have the same name.
    #[error(
        "two rules of one policy are named {name:?}: rule names must be unique within a policy"
    )]
    DuplicateRuleName {
        /// The repeated name.
        name: String,
    },
    /// A rule name is empty, too long or uses characters outside `A-Z a-z 0-9 . _ -`.
    #[error(
        "invalid rule name {name:?}: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
    )]
    InvalidRuleName {
        /// The rejected name.
        name: String,
    },
    /// A quota admits zero requests.
    #[error("rule {rule:?} has a limit of 0: a quota must admit at least one request per period")]
    ZeroLimit {
        /// The rule's name.
        rule: String,
    },
    /// A quota has a burst of zero.
    #[error(
        "rule {rule:?} has a burst of 0: the burst must be at least 1 (or left unset to equal the limit)"
    )]
    ZeroBurst {
        /// The rule's name.
        rule: String,
    },
    /// A quota's period is shorter than a millisecond or longer than ten years.
    #[error("rule {rule:?} has a period of {period:?}: periods must be between 1 ms and 10 years")]
    PeriodOutOfRange {
        /// The rule's name.
        rule: String,
        /// The rejected period.
        period: Duration,
    },
    /// A sliding-log rule's limit is above [`Algorithm::SLIDING_LOG_MAX_LIMIT`](crate::policy::Algorithm::SLIDING_LOG_MAX_LIMIT):
    /// the log keeps one entry per admitted request.
    #[error(
        "rule {rule:?} is a sliding log with a limit of {limit}, above the maximum of {max}: the log keeps one \
         entry per request, so use a sliding window counter (`Rule::sliding_window`) for large limits"
    )]
    SlidingLogTooLong {
        /// The rule's name.
        rule: String,
        /// The rejected limit.
        limit: u32,
        /// The maximum.
        max: u32,
    },
    /// A sliding-window rule's sub-intervals are out of range or do not divide its period into
    /// whole microseconds.
    #[error(
        "rule {rule:?} splits its period of {period:?} into {sub_intervals} sub-intervals: use 1 to 100 \
         sub-intervals that divide the period into whole microseconds"
    )]
    InvalidSubIntervals {
        /// The rule's name.
        rule: String,
        /// The rejected number of sub-intervals.
        sub_intervals: u16,
        /// The rule's period.
        period: Duration,
    },
    /// A bucket rule (token bucket, GCRA) whose burst and rate cannot be computed exactly: its
    /// state, in units of 1/period of a request, would pass 2^53.
    #[error(
        "rule {rule:?} has a burst of {burst}, too large to count exactly at its rate: use a burst of at \
         most {max}, or a rate whose limit and period (in µs) share larger common factors"
    )]
    BurstTooLarge {
        /// The rule's name.
        rule: String,
        /// The rejected burst.
        burst: u32,
        /// The largest burst that fits this rule's rate.
        max: u64,
    },
    /// A `max_delay` on a rule whose algorithm keeps no schedule to queue a request in (a fixed
    /// window, a sliding log, a sliding window): only GCRA and token-bucket rules can delay.
    #[error(
        "rule {rule:?} has a max_delay, but only GCRA and token-bucket rules can delay a request: \
         use one of those to smooth bursts, or remove max_delay"
    )]
    DelayNotScheduled {
        /// The rule's name.
        rule: String,
    },
    /// A rule's `max_delay` is below 1 ms or above the longest a rule may hold a request (at most
    /// [`MAX_DELAY`](crate::policy::MAX_DELAY), less when a very fast rate would queue more
    /// units than its scripts count exactly).
    #[error("rule {rule:?} has a max_delay of {max_delay:?}: use between 1 ms and {max:?}")]
    MaxDelayOutOfRange {
        /// The rule's name.
        rule: String,
        /// The rejected delay.
        max_delay: Duration,
        /// The longest delay this rule may have.
        max: Duration,
    },
    /// The layer was built without a key extractor.
    #[error(
        "no key extractor: call `.key(...)` with e.g. `ClientIp::peer()` or `HeaderKey::new(\"x-api-key\")`"
    )]
    MissingKeyExtractor,
    /// The store deadline is zero or unreasonably long.
    #[error("store deadline {0:?} is out of range: use between 1 ms and 60 s")]
    DeadlineOutOfRange(Duration),
    /// A layer's deadline at or below its store's fallback timeout
    /// ([`Store::fallback_timeout`](crate::Store::fallback_timeout)): the deadline would answer
    /// first, with the failure mode (`Skipped`), and the fallback never (`Degraded`).
    #[error(
        "the store's fallback answers after {timeout:?}, but the layer's deadline is {deadline:?}: \
         the deadline would answer first, with the failure mode, and the fallback never; set the \
         fallback's timeout below the deadline, or raise the deadline"
    )]
    FallbackAfterDeadline {
        /// The store's fallback timeout.
        timeout: Duration,
        /// The layer's deadline.
        deadline: Duration,
    },
    /// A store setting is invalid (bad URL, bad prefix, …).
    #[error("invalid store configuration: {0}")]
    Store(StoreConfigError),
    /// A key extractor setting is invalid.
    #[error("invalid key extractor configuration: {0}")]
    KeyExtractor(KeyConfigError),
    /// A load shedder setting is invalid (no capacity, a dead zone out of order, …).
    #[error("invalid load shedder configuration: {0}")]
    Shed(ShedConfigError),
    /// A concurrency limit or fleet shedder setting is invalid (no limit, a permit TTL out of range, …).
    #[error("invalid concurrency configuration: {0}")]
    Concurrency(ConcurrencyConfigError),
    /// Two plans of one rate limit have the same name.
    #[error("plan {0:?} is given twice: each plan names one policy")]
    DuplicatePlan(String),
    /// A setting of a configuration file ([`LimitsConfig`](crate::config::LimitsConfig)) that
    /// names what is not there, or does not fit with another setting.
    #[cfg(feature = "config")]
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    #[error("{0}")]
    Setting(SettingError),
    /// A field of a configuration file ([`LimitsConfig`](crate::config::LimitsConfig)) is
    /// invalid: `field` is its path (`routes.api.policy`), `error` what is wrong with it.
    /// Displayed as `` `routes.api.policy`: no policy named "ap1" (there are "api") ``.
    #[cfg(feature = "config")]
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    #[error("`{field}`: {}", error.detail())]
    Field {
        /// The path of the field, from the top of the configuration.
        field: String,
        /// What is wrong with it (never itself a `Field`).
        error: Box<ConfigError>,
    },
}

impl ConfigError {
    /// This error, as the error of the configuration field at `field` (unchanged if it already
    /// names its field).
    #[cfg(feature = "config")]
    pub(crate) fn at(self, field: impl Into<String>) -> ConfigError {
        match self {
            ConfigError::Field { .. } => self,
            other => ConfigError::Field {
                field: field.into(),
                error: Box::new(other),
            },
        }
    }

    /// The message without the concern's preamble ("invalid store configuration: "), which a
    /// field's path makes redundant.
    #[cfg(feature = "config")]
    fn detail(&self) -> String {
        match self {
            ConfigError::Store(error) => error.to_string(),
            ConfigError::KeyExtractor(error) => error.to_string(),
            ConfigError::Shed(error) => error.to_string(),
            ConfigError::Concurrency(error) => error.to_string(),
            other => other.to_string(),
        }
    }
}

macro_rules! from_concern {
    ($($error:ident => $variant:ident),* $(,)?) => {
        $(
            impl From<$error> for ConfigError {
                fn from(error: $error) -> Self {
                    ConfigError::$variant(error)
                }
            }
        )*
    };
}

from_concern! {
    StoreConfigError => Store,
    KeyConfigError => KeyExtractor,
    ShedConfigError => Shed,
    ConcurrencyConfigError => Concurrency,
}

/// `{:?}` as `{}`: what `main` prints of the error it returns is the message.
macro_rules! debug_as_display {
    ($($error:ty),* $(,)?) => {
        $(
            impl std::fmt::Debug for $error {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    std::fmt::Display::fmt(self, f)
                }
            }
        )*
    };
}
#[cfg(feature = "config")]
pub(crate) use debug_as_display;

debug_as_display!(
    ConfigError,
    StoreConfigError,
    KeyConfigError,
    ShedConfigError,
    ConcurrencyConfigError,
);
