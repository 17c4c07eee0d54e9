//! Named policies in a configuration file: each a list of rules.

use std::time::Duration;

use serde::Deserialize;

use super::duration;
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
}

/// One rule of a policy.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// The rule's name: 1 to 64 ASCII letters, digits, `.`, `_` or `-`; named in headers and in
    /// Redis keys.
    pub name: String,
    /// `fixed_window`, `sliding_log`, `sliding_window`, `token_bucket` or `gcra`.
    pub algorithm: AlgorithmName,
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

/// An algorithm's name in a configuration file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmName {
    /// [`Rule::fixed_window`].
    FixedWindow,
    /// [`Rule::sliding_log`].
    SlidingLog,
    /// [`Rule::sliding_window`].
    SlidingWindow,
    /// [`Rule::token_bucket`].
    TokenBucket,
    /// [`Rule::gcra`].
    Gcra,
}

/// The sliding window's sub-intervals when a rule does not say.
const DEFAULT_SUB_INTERVALS: u16 = 60;

impl PolicyConfig {
    /// The policy, its errors named from `field` (`policies.api`).
    pub(super) fn build(&self, field: &str) -> Result<Policy, ConfigError> {
        if self.rules.is_empty() {
            return Err(ConfigError::Field {
                field: format!("{field}.rules"),
                reason: "is empty: a policy needs at least one rule".to_owned(),
            });
        }
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(index, rule)| rule.build(&format!("{field}.rules[{index}]")))
            .collect::<Result<Vec<_>, _>>()?;
        // Per-rule mistakes were named above; what is left concerns the rules together (two with
        // one name, too many).
        Policy::new(rules).map_err(|err| err.at(format!("{field}.rules")))
    }
}

impl RuleConfig {
    fn build(&self, field: &str) -> Result<Rule, ConfigError> {
        let algorithm = match self.algorithm {
            AlgorithmName::FixedWindow => Algorithm::FixedWindow,
            AlgorithmName::SlidingLog => Algorithm::SlidingLog,
            AlgorithmName::SlidingWindow => Algorithm::SlidingWindow {
                sub_intervals: self.sub_intervals.unwrap_or(DEFAULT_SUB_INTERVALS),
            },
            AlgorithmName::TokenBucket => Algorithm::TokenBucket,
            AlgorithmName::Gcra => Algorithm::Gcra,
        };
        if self.sub_intervals.is_some() && self.algorithm != AlgorithmName::SlidingWindow {
            return Err(ConfigError::Field {
                field: format!("{field}.sub_intervals"),
                reason: "only a sliding_window rule has sub-intervals".to_owned(),
            });
        }
        if self.burst.is_some()
            && !matches!(
                self.algorithm,
                AlgorithmName::TokenBucket | AlgorithmName::Gcra
            )
        {
            return Err(ConfigError::Field {
                field: format!("{field}.burst"),
                reason: "only token_bucket and gcra rules have a burst".to_owned(),
            });
        }
        let mut quota = Quota::new(self.limit, self.period);
        if let Some(burst) = self.burst {
            quota = quota.with_burst(burst);
        }
        let rule = Rule::new(self.name.clone(), algorithm, quota);
        // A one-rule policy runs every check a rule gets (name, quota, algorithm limits).
        Policy::try_from(rule.clone()).map_err(|err| err.at(field.to_owned()))?;
        Ok(rule)
    }
}
