//! The headers of a request decided by a group of several limits (all or nothing), made once per
//! group and kept: making them (a policy of the group's rules under the names the client sees,
//! and each rule's lines) cost a request of three descriptors about 14,700 instructions of
//! 62,900 (`benches/envoy_cost.rs`). A group of one limit keeps its own
//! ([`Limit::headers`](super::limit::Limit)).

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use tower_redis_ratelimit::Quota;
use tower_redis_ratelimit::policy::{Algorithm, Policy, Rule};
use tower_redis_ratelimit::respond::PolicyHeaders;

use super::counted::Counted;
use super::matching::Found;

/// The most groups kept. A domain's files make few (one per set of descriptors Envoy's actions
/// send together); past it a group's headers are made each time and not kept, so that requests
/// (a descriptor's own `limit` is a rule of its own) cannot grow memory without bound.
const KEPT: usize = 1024;

/// What tells two groups' headers apart: each rule as the client sees it, in order.
type Shown = Vec<(String, Algorithm, Quota)>;

/// The headers of the groups of several limits seen so far, for one loading of the files.
#[derive(Default)]
pub(super) struct GroupHeaders {
    kept: RwLock<HashMap<Shown, Option<PolicyHeaders>>>,
}

impl GroupHeaders {
    /// The headers of `group`'s decisions: its rules under the names the client sees (each
    /// limit's [`shown`](super::limit::Limit) name, made unique with the descriptor's position).
    /// `None` would be a bug (names made plain, quotas checked when the file loaded), answered
    /// without headers.
    pub(super) fn of(&self, group: &[Counted], found: &[Option<Found>]) -> Option<PolicyHeaders> {
        let limit = |counted: &Counted| found[counted.index].as_ref().map(|found| &found.limit);
        if let [one] = group {
            return limit(one)?.headers().cloned();
        }
        let mut shown: Shown = Vec::with_capacity(group.len());
        for counted in group {
            let mut name = limit(counted)?.shown.clone();
            if name.is_empty() || shown.iter().any(|(other, ..)| *other == name) {
                name = format!("{name}.{}", counted.index);
            }
            shown.push((name, counted.rule.algorithm(), counted.rule.quota()));
        }
        let kept = self.kept.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(headers) = kept.get(&shown) {
            return headers.clone();
        }
        drop(kept);
        let rules = shown
            .iter()
            .map(|(name, algorithm, quota)| Rule::new(name.as_str(), *algorithm, *quota));
        let headers = Policy::new(rules).ok().map(PolicyHeaders::new);
        let mut kept = self.kept.write().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT {
            kept.insert(shown, headers.clone());
        }
        headers
    }
}
