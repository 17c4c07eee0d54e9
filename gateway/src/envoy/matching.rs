//! Which limit a request's descriptor gets, as envoyproxy/ratelimit finds it: level by level, a
//! `key_value` match first, then a wildcard value (`foo*`, in file order), then the key without
//! a value; the limit is the one at the descriptor's last entry, so a descriptor deeper or
//! shallower than the tree matches nothing. Then `replaces` drops the limits that other matched
//! limits replace.

use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use tower_redis_ratelimit::Quota;
use tower_redis_ratelimit::policy::Algorithm;

use super::limit::{Limit, LimitKind, Reported, unit_period};
use super::tree::Domain;

/// A descriptor's limit and what it is counted and reported under.
#[derive(Clone, Debug)]
pub struct Found {
    /// The limit.
    pub limit: Arc<Limit>,
    /// What tells its counter apart from every other of its domain: each entry's `key_value`
    /// (a shared wildcard's pattern in place of the value), as the reference's cache key.
    pub counter: Vec<(String, String)>,
    /// Where its metrics go when the request's values say (`detailed_metric`,
    /// `value_to_metric`, `share_threshold`): the domain, then one part per level; `None`
    /// for the limit's own ([`Limit::metric_key`]).
    pub metric_key: Option<Vec<String>>,
}

impl Domain {
    /// The limit of a descriptor of `entries`, if one matches.
    pub fn find(&self, domain: &str, entries: &[Entry]) -> Option<Found> {
        let mut node = &self.root;
        let mut steps = Vec::with_capacity(entries.len());
        let mut found = None;
        for (index, entry) in entries.iter().enumerate() {
            // No child can be named by the `key_value` (its name has no `_`) nor match it: the
            // key alone is looked up, as it would be after both failed.
            let final_key = (node.by_key_value || !node.wildcards.is_empty())
                .then(|| format!("{}_{}", entry.key, entry.value));
            let by_value = final_key.as_ref().and_then(|key| node.children.get(key));
            let wildcard = by_value.is_none().then(|| {
                let final_key = final_key.as_deref()?;
                node.wildcards
                    .iter()
                    .find(|(_, parts)| wildcard_match(parts, final_key))
                    .and_then(|(pattern, _)| Some((pattern, node.children.get(pattern)?)))
            });
            let (next, matched) = match (by_value, wildcard.flatten()) {
                (Some(next), _) => (next, Matched::Value),
                (None, Some((pattern, next))) => (next, Matched::Wildcard(pattern)),
                (None, None) => match node.children.get(&entry.key) {
                    Some(next) => (next, Matched::Key),
                    None => return None,
                },
            };
            // A shared wildcard counts every value it matches in one counter.
            let shared = match matched {
                Matched::Wildcard(pattern) if next.share_threshold => {
                    pattern.get(entry.key.len() + 1..)
                }
                _ => None,
            };
            steps.push(Step {
                entry,
                matched,
                shared,
                value_to_metric: next.value_to_metric,
            });
            if index == entries.len() - 1 {
                found = next.limit.clone();
            }
            node = next;
        }
        let limit = found?;
        let counter = steps
            .iter()
            .map(|step| {
                let value = step.shared.unwrap_or(&step.entry.value);
                (step.entry.key.clone(), value.to_owned())
            })
            .collect();
        // The file's metric key unless a flag asks for the request's values.
        let dynamic = limit.detailed_metric
            || steps
                .iter()
                .any(|step| step.value_to_metric || step.shared.is_some());
        let metric_key = dynamic.then(|| {
            let parts = steps.iter().map(|step| {
                let value = if limit.detailed_metric {
                    Some(step.shared.unwrap_or(&step.entry.value))
                } else {
                    step.metric_value()
                };
                match value {
                    Some(value) if !value.is_empty() => format!("{}_{value}", step.entry.key),
                    _ => step.entry.key.clone(),
                }
            });
            std::iter::once(domain.to_owned()).chain(parts).collect()
        });
        Some(Found {
            limit,
            counter,
            metric_key,
        })
    }
}

/// How one entry of a descriptor matched.
struct Step<'a> {
    entry: &'a Entry,
    matched: Matched<'a>,
    /// A shared wildcard's pattern, in place of the value.
    shared: Option<&'a str>,
    value_to_metric: bool,
}

impl<'a> Step<'a> {
    /// The value this level's metrics carry, as the reference's `value_to_metric` says.
    fn metric_value(&self) -> Option<&'a str> {
        let pattern_value = |pattern: &'a String| pattern.get(self.entry.key.len() + 1..);
        match self.matched {
            Matched::Wildcard(_) if self.shared.is_some() => self.shared,
            Matched::Wildcard(_) if self.value_to_metric => Some(&self.entry.value),
            Matched::Wildcard(pattern) => pattern_value(pattern),
            Matched::Value => Some(&self.entry.value),
            Matched::Key => self.value_to_metric.then_some(self.entry.value.as_str()),
        }
    }
}

impl Found {
    /// Counts `hits` of this descriptor in its metrics: its limit's, unless the request's
    /// values are in them.
    pub(super) fn record(&self, hit: super::metrics::Hit, hits: u64) {
        match &self.metric_key {
            Some(key) => super::metrics::record(&super::metrics::labels(key), hit, hits),
            None => self.limit.metrics.record(hit, hits),
        }
    }

    /// A descriptor's own limit (`limit` in the request), in place of the files': counted in a
    /// fixed window, as the reference does, never in shadow mode. Its counter is the
    /// descriptor's entries, as the reference's key; a unit Envoy does not name counts per
    /// second.
    pub fn overridden(
        domain: &str,
        descriptor: &RateLimitDescriptor,
        over: &RateLimitOverride,
    ) -> Found {
        let unit = Unit::try_from(over.unit).unwrap_or(Unit::Unknown);
        let reported = Reported {
            requests_per_unit: over.requests_per_unit,
            unit,
        };
        let kind = if over.requests_per_unit == 0 {
            LimitKind::Nothing(reported)
        } else {
            LimitKind::Counted {
                algorithm: Algorithm::FixedWindow,
                quota: Quota::new(over.requests_per_unit, unit_period(unit)),
                reported,
            }
        };
        let counter: Vec<(String, String)> = descriptor
            .entries
            .iter()
            .map(|entry| (entry.key.clone(), entry.value.clone()))
            .collect();
        let mut metric_key = vec![domain.to_owned()];
        metric_key.extend(counter.iter().map(|(key, value)| match value.is_empty() {
            true => key.clone(),
            false => format!("{key}_{value}"),
        }));
        Found {
            limit: Arc::new(Limit::new(
                None,
                Vec::new(),
                kind,
                false,
                false,
                metric_key,
                &descriptor
                    .entries
                    .iter()
                    .map(|entry| entry.key.clone())
                    .collect::<Vec<_>>(),
            )),
            // Apart from the files' counters of the same entries: another quota.
            counter: std::iter::once(("limit".to_owned(), over.requests_per_unit.to_string()))
                .chain(std::iter::once(("unit".to_owned(), over.unit.to_string())))
                .chain(counter)
                .collect(),
            metric_key: None,
        }
    }
}

enum Matched<'a> {
    Value,
    Wildcard(&'a String),
    Key,
}

/// Drops the limits that another matched limit `replaces` (by `name`), as the reference does:
/// the replaced limit is neither counted nor reported for this request.
pub fn apply_replaces(found: &mut [Option<Found>]) {
    let replaced: Vec<&str> = found
        .iter()
        .flatten()
        .flat_map(|found| found.limit.replaces.iter().map(String::as_str))
        .collect();
    if replaced.is_empty() {
        return;
    }
    let replaced: Vec<String> = replaced.into_iter().map(str::to_owned).collect();
    for slot in found.iter_mut() {
        let drop = slot
            .as_ref()
            .and_then(|found| found.limit.name.as_ref())
            .is_some_and(|name| replaced.contains(name));
        if drop {
            *slot = None;
        }
    }
}

/// Whether `value` matches a pattern split on `*`: each `*` any run of characters, in order.
pub(super) fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (first, last) = match parts {
        [] => return value.is_empty(),
        [only] => return only == value,
        [first, .., last] => (first, last),
    };
    if value.len() < parts.iter().map(String::len).sum::<usize>()
        || !value.starts_with(first.as_str())
        || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;

    fn parts(pattern: &str) -> Vec<String> {
        pattern.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn wildcards_match_as_the_reference_does() {
        assert!(wildcard_match(&parts("key1_value*"), "key1_value1"));
        assert!(wildcard_match(&parts("key1_value*"), "key1_value"));
        assert!(!wildcard_match(&parts("key1_value*"), "key1_valu"));
        assert!(wildcard_match(
            &parts("path_/api/*/action"),
            "path_/api/123/action"
        ));
        assert!(!wildcard_match(
            &parts("path_/api/*/action"),
            "path_/api/123/other"
        ));
        let two = parts("route_/api/*/resource/*/action");
        assert!(wildcard_match(&two, "route_/api/v1/resource/456/action"));
        assert!(!wildcard_match(&two, "route_/api/v1/resource/action"));
        // The prefix and the suffix may not overlap.
        assert!(!wildcard_match(&parts("k_ab*ba"), "k_aba"));
    }
}
