//! Named policies in a configuration file: each a list of rules.

use std::time::Duration;

use serde::{Deserialize, Deserializer, de};

use super::{SettingError, duration, error, invalid};
use crate::error::ConfigError;
use crate::policy::{Algorithm, Policy, Rule};
use crate::quota::Quota;

/// A policy: rules checked and counted together, all or nothing.
///
/// ```toml
/// [policies.api]
/// rules = [
///   { name = "second", algorithm = "gcra", limit = 10, period = "1s", burst = 20 },
///   { name = "hour", algorithm = "sliding_window", limit = 1000, period = "1h", sub_intervals = 60 },
/// ]
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The rules, at least one.
    pub rules: Vec<RuleConfig>,
    /// One quota for every region ([`Policy::global`]): one `fixed_window`, `sliding_window`,
    /// `gcra` or `token_bucket` rule, decided in each region by a store with a `region` table
    /// (default `false`).
    #[serde(default)]
    pub global: bool,
}

/// One rule of a policy.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// The rule's name: 1 to 64 ASCII letters, digits, `.`, `_` or `-`; named in headers and in
    /// Redis keys.
    pub name: String,
    /// `fixed_window`, `sliding_log`, `sliding_window`, `token_bucket` or `gcra`: the names of
    /// [`Algorithm`]'s variants. A sliding window's sub-intervals are [`sub_intervals`](Self::sub_intervals)
    /// (default 60).
    #[serde(deserialize_with = "algorithm_by_name")]
    pub algorithm: Algorithm,
    /// Units of cost per period.
    pub limit: u32,
    /// The period, e.g. `"1s"`, `"1min"`, `"1h"`.
    #[serde(deserialize_with = "duration::required")]
    pub period: Duration,
    /// For the token bucket and GCRA: how many may come at once (default: the limit).
    #[serde(default)]
    pub burst: Option<u32>,
    /// For the sliding window: sub-intervals per period (default 60).
    #[serde(default)]
    pub sub_intervals: Option<u16>,
}

/// The sliding window's sub-intervals when a rule does not say.
const DEFAULT_SUB_INTERVALS: u16 = 60;

impl PolicyConfig {
    /// The policy, its errors named from `field` (`policies.api`).
    pub(super) fn build(&self, field: &str) -> Result<Policy, ConfigError> {
        if self.rules.is_empty() {
            return Err(invalid(format!("{field}.rules"), SettingError::NoRules));
        }
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(index, rule)| rule.build(&format!("{field}.rules[{index}]")))
            .collect::<Result<Vec<_>, _>>()?;
        // Per-rule mistakes were named above; what is left concerns the rules together (two with
        // one name, too many, a global policy's one rule not one it can hold).
        Policy::of(rules, self.global).map_err(|err| match err {
            ConfigError::GlobalRule { .. } => err.at(format!("{field}.rules[0]")),
            err => err.at(format!("{field}.rules")),
        })
    }
}

impl RuleConfig {
    fn build(&self, field: &str) -> Result<Rule, ConfigError> {
        let algorithm = match (self.algorithm, self.sub_intervals) {
            (Algorithm::SlidingWindow { .. }, Some(sub_intervals)) => {
                Algorithm::SlidingWindow { sub_intervals }
            }
            (algorithm, _) => algorithm,
        };
        let not_a_setting = |setting: &'static str| {
            invalid(
                format!("{field}.{setting}"),
                SettingError::NotARuleSetting {
                    setting,
                    algorithm: algorithm.name(),
                },
            )
        };
        if self.sub_intervals.is_some() && !matches!(algorithm, Algorithm::SlidingWindow { .. }) {
            return Err(not_a_setting("sub_intervals"));
        }
        if self.burst.is_some() && !matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra) {
            return Err(not_a_setting("burst"));
        }
        let mut quota = Quota::new(self.limit, self.period);
        if let Some(burst) = self.burst {
            quota = quota.with_burst(burst);
        }
        let rule = Rule::new(self.name.clone(), algorithm, quota);
        // A one-rule policy runs every check a rule gets (name, quota, algorithm limits).
        Policy::try_from(rule.clone())
            .map_err(|err| error::at(field, err, |err| self.setting(err)))?;
        Ok(rule)
    }

    /// The setting a rule's error is about.
    fn setting(&self, error: &ConfigError) -> Option<&'static str> {
        Some(match error {
            ConfigError::ZeroLimit { .. } | ConfigError::SlidingLogTooLong { .. } => "limit",
            // Without a burst, the limit is the burst.
            ConfigError::ZeroBurst { .. } | ConfigError::BurstTooLarge { .. }
                if self.burst.is_some() =>
            {
                "burst"
            }
            ConfigError::ZeroBurst { .. } | ConfigError::BurstTooLarge { .. } => "limit",
            ConfigError::PeriodOutOfRange { .. } => "period",
            ConfigError::InvalidRuleName { .. } => "name",
            ConfigError::InvalidSubIntervals { .. } => "sub_intervals",
            _ => return None,
        })
    }
}

/// An algorithm by its name alone: a sliding window's sub-intervals are a setting of their own
/// (serde's derived `Algorithm` would want `{ sliding_window = { sub_intervals = 60 } }`).
fn algorithm_by_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Algorithm, D::Error> {
    // A visitor rather than a String read first: the formats place an error the visitor returns
    // at the value.
    struct Name;
    impl de::Visitor<'_> for Name {
        type Value = Algorithm;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an algorithm's name")
        }

        fn visit_str<E: de::Error>(self, name: &str) -> Result<Algorithm, E> {
            Algorithm::named(name, DEFAULT_SUB_INTERVALS)
                .ok_or_else(|| E::unknown_variant(name, &Algorithm::NAMES))
        }
    }
    deserializer.deserialize_str(Name)
}
