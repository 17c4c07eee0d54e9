//! A `rate_limit` of envoyproxy/ratelimit's files, validated as the reference validates it
//! (units, `unlimited`, `replaces`) with the gateway's extensions (algorithm, burst, any
//! period), and what the service keeps of it: what it admits, how Envoy is told it, its metrics'
//! labels and its headers.

use std::sync::OnceLock;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use tower_redis_ratelimit::Quota;
use tower_redis_ratelimit::policy::{Algorithm, Policy, Rule};
use tower_redis_ratelimit::respond::PolicyHeaders;

use super::file::{DescriptorFile, Level, RateLimitFile};
use crate::config::EnvoyFilesError;

/// A `rate_limit`, as the service applies it.
#[derive(Debug)]
pub struct Limit {
    /// Its `name` (what `replaces` refers to; reported in `current_limit`).
    pub name: Option<String>,
    /// The names it replaces.
    pub replaces: Vec<String>,
    /// What it admits.
    pub kind: LimitKind,
    /// Counted and reported, never refusing.
    pub shadow: bool,
    /// Metrics per value.
    pub detailed_metric: bool,
    /// Where its metrics go when not detailed: the domain, then each level's `key` or
    /// `key_value` as written in the file.
    pub metric_key: Vec<String>,
    /// The metrics of [`metric_key`](Self::metric_key), their keys made once.
    pub(super) metrics: super::metrics::Series,
    /// Its rule's name in the client's headers: its `name`, else its descriptor's keys (never a
    /// value: values are the requests', often who sent them), in the characters a rule's name
    /// may have.
    pub(super) shown: String,
    /// The headers of a request decided by this limit alone, made on first use.
    pub(super) headers: OnceLock<Option<PolicyHeaders>>,
}

impl Limit {
    /// A limit; `keys` are its descriptor's keys, level by level.
    pub(super) fn new(
        name: Option<String>,
        replaces: Vec<String>,
        kind: LimitKind,
        shadow: bool,
        detailed_metric: bool,
        metric_key: Vec<String>,
        keys: &[String],
    ) -> Self {
        let shown = name.clone().unwrap_or_else(|| keys.join("."));
        let shown = shown
            .chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    true => c,
                    false => '_',
                },
            )
            .take(56)
            .collect();
        Self {
            metrics: super::metrics::Series::new(&super::metrics::labels(&metric_key)),
            name,
            replaces,
            kind,
            shadow,
            detailed_metric,
            metric_key,
            shown,
            headers: OnceLock::new(),
        }
    }

    /// The headers of a request decided by this limit alone, under [`shown`](Self::shown)
    /// (none for a limit the store does not count).
    pub(super) fn headers(&self) -> Option<&PolicyHeaders> {
        self.headers
            .get_or_init(|| {
                let LimitKind::Counted {
                    algorithm, quota, ..
                } = &self.kind
                else {
                    return None;
                };
                let rule = Rule::new(self.shown.as_str(), *algorithm, *quota);
                Policy::try_from(rule).ok().map(PolicyHeaders::new)
            })
            .as_ref()
    }
}

/// What a limit admits.
#[derive(Clone, Debug)]
pub enum LimitKind {
    /// Everything, without asking the store (`unlimited: true`).
    Unlimited,
    /// Nothing (`requests_per_unit: 0`): refused without asking the store.
    Nothing(Reported),
    /// Counted by `algorithm` in the domain's store.
    Counted {
        /// The algorithm (extension; `fixed_window` by default).
        algorithm: Algorithm,
        /// The quota.
        quota: Quota,
        /// As Envoy is told it.
        reported: Reported,
    },
}

/// A limit as `current_limit` tells it: requests per unit; a period that is no unit
/// (extension) is reported as `UNKNOWN` with the limit per period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported {
    /// Requests per unit.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
}

/// The limit of a `rate_limit` block at `field`.
pub(super) fn limit(
    at: &Level<'_>,
    field: &str,
    file: &RateLimitFile,
    descriptor: &DescriptorFile,
    metric_key: Vec<String>,
    keys: &[String],
) -> Result<Limit, EnvoyFilesError> {
    let unit = match file.unit.as_deref() {
        None => None,
        Some(name) => match unit(name) {
            Some(unit) => Some(unit),
            None if file.unlimited => None,
            None => {
                return Err(at.error(
                    format!("{field}.unit"),
                    format!("invalid rate limit unit '{name}'"),
                ));
            }
        },
    };
    for (index, replaces) in file.replaces.iter().enumerate() {
        let replaces_field = format!("{field}.replaces[{index}].name");
        if replaces.name.is_empty() {
            return Err(at.error(replaces_field, "should not have an empty replaces entry"));
        }
        if file.name.as_deref() == Some(replaces.name.as_str()) {
            return Err(at.error(
                replaces_field,
                "replaces should not contain name of same descriptor",
            ));
        }
    }
    let extensions = &file.extensions;
    let kind = if file.unlimited {
        if unit.is_some() {
            return Err(at.error(
                format!("{field}.unit"),
                "should not specify rate limit unit when unlimited",
            ));
        }
        LimitKind::Unlimited
    } else {
        let (period, unit) = match (unit, extensions.period) {
            (Some(_), Some(_)) => {
                return Err(at.error(
                    format!("{field}.extensions.period"),
                    "give either `unit` or `extensions.period`, not both",
                ));
            }
            (Some(unit), None) => (unit_period(unit), unit),
            (None, Some(period)) => (period, period_unit(period)),
            (None, None) => {
                return Err(at.error(
                    format!("{field}.unit"),
                    format!(
                        "invalid rate limit unit '{}'",
                        file.unit.as_deref().unwrap_or("")
                    ),
                ));
            }
        };
        let reported = Reported {
            requests_per_unit: file.requests_per_unit,
            unit,
        };
        if extensions.max_delay.is_some() {
            return Err(at.error(
                format!("{field}.extensions.max_delay"),
                "Envoy's rate limit service answers at once and cannot make Envoy wait: smooth \
                 bursts with a route's max_delay in `proxy`, or in `serve` for nginx, Traefik \
                 and Caddy",
            ));
        }
        let name = extensions.algorithm.as_deref().unwrap_or("fixed_window");
        let algorithm =
            Algorithm::named(name, extensions.sub_intervals.unwrap_or(60)).ok_or_else(|| {
                at.error(
                    format!("{field}.extensions.algorithm"),
                    format!(
                        "unknown algorithm '{name}': one of {}",
                        Algorithm::NAMES.join(", ")
                    ),
                )
            })?;
        if extensions.sub_intervals.is_some()
            && !matches!(algorithm, Algorithm::SlidingWindow { .. })
        {
            return Err(at.error(
                format!("{field}.extensions.sub_intervals"),
                format!("not a setting of {}", algorithm.name()),
            ));
        }
        if extensions.burst.is_some()
            && !matches!(algorithm, Algorithm::Gcra | Algorithm::TokenBucket)
        {
            return Err(at.error(
                format!("{field}.extensions.burst"),
                format!("not a setting of {}", algorithm.name()),
            ));
        }
        if file.requests_per_unit == 0 {
            LimitKind::Nothing(reported)
        } else {
            let mut quota = Quota::new(file.requests_per_unit, period);
            if let Some(burst) = extensions.burst {
                quota = quota.with_burst(burst);
            }
            // The algorithms' own limits (a sliding log's length, a burst, a period's range)
            // are checked once here, on a rule of any valid name.
            Policy::try_from(Rule::new("check", algorithm, quota))
                .map_err(|err| at.error(field.to_owned(), err.to_string()))?;
            LimitKind::Counted {
                algorithm,
                quota,
                reported,
            }
        }
    };
    Ok(Limit::new(
        file.name.clone(),
        file.replaces
            .iter()
            .map(|entry| entry.name.clone())
            .collect(),
        kind,
        descriptor.shadow_mode,
        descriptor.detailed_metric,
        metric_key,
        keys,
    ))
}

/// The reference's units, by their names in any case.
fn unit(name: &str) -> Option<Unit> {
    match Unit::from_str_name(&name.to_ascii_uppercase())? {
        Unit::Unknown => None,
        unit => Some(unit),
    }
}

/// A unit's length, as the reference counts it (a month is 30 days, a year 365).
pub(super) fn unit_period(unit: Unit) -> Duration {
    const DAY: u64 = 24 * 60 * 60;
    Duration::from_secs(match unit {
        Unit::Unknown | Unit::Second => 1,
        Unit::Minute => 60,
        Unit::Hour => 60 * 60,
        Unit::Day => DAY,
        Unit::Week => 7 * DAY,
        Unit::Month => 30 * DAY,
        Unit::Year => 365 * DAY,
    })
}

/// The unit a period is, `UNKNOWN` for any other period.
fn period_unit(period: Duration) -> Unit {
    [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ]
    .into_iter()
    .find(|unit| unit_period(*unit) == period)
    .unwrap_or(Unit::Unknown)
}
