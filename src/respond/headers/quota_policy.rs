//! `RateLimit-Policy`: the quota a client is told about, the same on every response of a limit.
//! Made once per layer, when it is built.

use std::sync::Arc;

use http::HeaderValue;
#[cfg(feature = "concurrency")]
use sfv::{KeyRef, StringRef};
use sfv::{ListSerializer, key_ref};

use super::format::{header_value, sf_integer, sf_name, whole_seconds};
use super::line::LinePrefix;
use crate::policy::{Policy, Rule};

/// A rate policy with its `RateLimit-Policy` value and the start of each rule's `RateLimit` line:
/// made once per layer, shared by every report of a decision on it (one reference count, where a
/// copy of each would be moved with every request).
#[derive(Debug)]
pub(crate) struct RatePolicy {
    pub(crate) policy: Policy,
    pub(crate) header: HeaderValue,
    /// One per rule, in policy order.
    lines: Box<[LinePrefix]>,
}

impl RatePolicy {
    pub(crate) fn new(policy: Policy) -> Arc<Self> {
        let header = rate_policy(policy.rules());
        let lines = policy
            .rules()
            .iter()
            .map(|rule| LinePrefix::new(rule.name()))
            .collect();
        Arc::new(Self {
            policy,
            header,
            lines,
        })
    }

    /// The `RateLimit` line of rule `index`: `remaining` requests, reset in `reset_seconds`. None
    /// for an index the policy does not have.
    pub(crate) fn line(
        &self,
        index: usize,
        remaining: u64,
        reset_seconds: u64,
    ) -> Option<HeaderValue> {
        let prefix = self.lines.get(index)?;
        Some(prefix.line(remaining, reset_seconds))
    }
}

/// A rate policy's: every rule, as `"name";q=<capacity>;w=<seconds>`.
pub(crate) fn rate_policy(rules: &[Rule]) -> HeaderValue {
    let mut list = ListSerializer::new();
    for rule in rules {
        list.bare_item(sf_name(rule.name()))
            .parameter(key_ref("q"), sf_integer(u64::from(rule.capacity())))
            .parameter(
                key_ref("w"),
                sf_integer(whole_seconds(rule.window()).as_secs().max(1)),
            );
    }
    header_value(list.finish().unwrap_or_default())
}

/// A concurrency limit's: `"name";q=<limit>;qu="concurrent-requests"`.
#[cfg(feature = "concurrency")]
pub(crate) fn concurrency_policy(name: &str, limit: u32) -> HeaderValue {
    let mut policy = ListSerializer::new();
    policy
        .bare_item(sf_name(name))
        .parameter(KeyRef::constant("q"), sf_integer(u64::from(limit)))
        .parameter(
            KeyRef::constant("qu"),
            StringRef::constant("concurrent-requests"),
        );
    header_value(policy.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::quota::Quota;

    #[test]
    fn a_rate_policy_lists_every_rule_in_draft_10_syntax() {
        let rules = [
            Rule::fixed_window("per-10s", Quota::new(5, Duration::from_secs(10))),
            Rule::gcra("burst", Quota::per_minute(100).with_burst(10)),
        ];
        assert_eq!(
            rate_policy(&rules),
            r#""per-10s";q=5;w=10, "burst";q=10;w=6"#
        );
        let sub_second = [Rule::fixed_window(
            "fast",
            Quota::new(10, Duration::from_millis(100)),
        )];
        assert_eq!(rate_policy(&sub_second), r#""fast";q=10;w=1"#);
    }

    #[cfg(feature = "concurrency")]
    #[test]
    fn a_concurrency_policy_names_its_quota_unit() {
        assert_eq!(
            concurrency_policy("ws", 3),
            r#""ws";q=3;qu="concurrent-requests""#
        );
    }
}
