//! A descriptor's counter reset: the limit the descriptor finds in its domain's tree, named as
//! `decide` names it (the counter's rule, under the key its domain's placement gives it), reset
//! in the domain's store.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use tower_redis_ratelimit::policy::Policy;

use super::decide::counter_rule;
use super::limit::LimitKind;
use super::loaded::Loaded;
use crate::runtime::{ResetError, reset_within};

/// Resets the counter that the descriptor of `entries` counts in, in `domain`; says what it did.
/// A request's own `limit` override counts elsewhere and is not reached: a reset names the
/// files' limits.
pub(super) async fn reset(
    loaded: &Loaded,
    domain: &str,
    entries: &[(String, String)],
) -> Result<String, ResetError> {
    let (Some(tree), Some(store)) = (loaded.domains.get(domain), loaded.store(domain)) else {
        let mut known: Vec<&str> = loaded.domains.iter().map(|(name, _)| name).collect();
        known.sort_unstable();
        return Err(ResetError::Unknown(format!(
            "no domain {domain:?} in the Envoy files: they have {known:?}"
        )));
    };
    let entries: Vec<Entry> = entries
        .iter()
        .map(|(key, value)| Entry {
            key: key.clone(),
            value: value.clone(),
        })
        .collect();
    let shown = || {
        entries
            .iter()
            .map(|entry| format!("{}={}", entry.key, entry.value))
            .collect::<Vec<_>>()
            .join(",")
    };
    let found = tree.find(domain, &entries).ok_or_else(|| {
        ResetError::Unknown(format!(
            "no limit of domain {domain:?} matches the descriptor {}",
            shown()
        ))
    })?;
    let LimitKind::Counted {
        algorithm, quota, ..
    } = &found.limit.kind
    else {
        return Err(ResetError::Unknown(format!(
            "the limit of descriptor {} counts nothing (unlimited, or a limit of 0): there is \
             nothing to reset",
            shown()
        )));
    };
    let rule = counter_rule(&found, *algorithm, *quota);
    let key = tree.placement.key(domain, &rule);
    let policy = Policy::try_from(rule).map_err(|err| ResetError::Invalid(err.to_string()))?;
    reset_within(store.reset(&key, &policy)).await?;
    Ok(format!(
        "reset the counter of descriptor {} in domain {domain:?}",
        shown()
    ))
}
