//! The headers of a rate-limit decision, in each family, as the
//! [headers reference](crate::guide::headers) says; `Retry-After` on a denial, except for a
//! request that can never pass ([`Outcome::Never`]): no wait would let it in, so no wait is named.

use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};

use super::HeaderFamilies;
use super::format::{epoch_seconds, fill, retry_after, retry_seconds, whole_seconds};
use super::integer::integer;
use super::names::{
    EXPIRES_AT, RATELIMIT, RATELIMIT_POLICY, STATE, TOTAL_REQUESTS, X_LIMIT, X_REMAINING, X_RESET,
    X_USED,
};
use super::partition::Partition;
use super::quota_policy::RatePolicy;
use super::rfc3339::rfc3339;
use crate::decision::{Decision, Outcome};

/// What a rate-limit decision tells the client: the decision on `policy`, made `at`.
#[derive(Clone, Debug)]
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    pub(crate) policy: Arc<RatePolicy>,
    pub(crate) at: SystemTime,
    /// The client's partition key, for `RateLimit`'s `pk` (when the layer adds it).
    pub(crate) partition: Option<Partition>,
    /// Made in shadow mode: told in the `Rate-Limiting-*` headers alone, as a `Shadow-` state.
    pub(crate) shadow: bool,
}

impl Decided {
    pub(crate) fn apply(self, headers: &mut HeaderMap, families: HeaderFamilies) {
        let Decided {
            decision,
            policy,
            at,
            partition,
            shadow,
        } = self;
        // The first whole second at or after the exact instant: rounded up, never down, so a
        // client that waits until then finds the period over.
        let reset_at = epoch_seconds(at + decision.full_after());
        if families.contains(HeaderFamilies::RATE_LIMITING) {
            // A fallback's decision, admitted or refused, says so: it counted one instance's
            // share of the quota, not the fleet's (the status tells admitted from refused). A
            // shadow decision says so instead, whatever decided it: nothing was enforced.
            let state = if shadow {
                if decision.is_allowed() {
                    "Shadow-Allow"
                } else {
                    "Shadow-Deny"
                }
            } else if decision.is_degraded() {
                "Degraded"
            } else if decision.is_allowed() {
                "Allow"
            } else {
                "Deny"
            };
            fill(headers, TOTAL_REQUESTS, integer(decision.used()));
            fill(headers, STATE, HeaderValue::from_static(state));
            fill(headers, EXPIRES_AT, rfc3339(reset_at));
        }
        // What clients back off by (a `RateLimit` with nothing remaining, `Retry-After`) is never
        // told of a limit that is not enforced.
        if shadow {
            return;
        }
        if families.contains(HeaderFamilies::IETF) {
            headers.append(RATELIMIT_POLICY, policy.header.clone());
            // A custom store may report a rule index of another policy: without the rule there is
            // no line to write, and a line about another rule would mislead.
            let seconds = match decision.retry_after() {
                Some(wait) => retry_seconds(wait),
                None => {
                    let rule = policy.policy.rules().get(decision.rule_index());
                    whole_seconds(more_after(&decision, rule)).as_secs()
                }
            };
            let line = policy.line(decision.rule_index(), decision.remaining(), seconds);
            if let Some(line) = line {
                headers.append(RATELIMIT, with_partition(line, partition.as_ref()));
            }
        }
        if families.contains(HeaderFamilies::X_RATELIMIT) {
            fill(headers, X_LIMIT, integer(decision.limit()));
            fill(headers, X_REMAINING, integer(decision.remaining()));
            fill(headers, X_USED, integer(decision.used()));
            fill(headers, X_RESET, integer(reset_at));
        }
        if decision.outcome() == Outcome::Denied {
            retry_after(headers, decision.retry_after().unwrap_or_default());
        }
    }
}

/// `line` with the `pk` parameter of `partition`, if any.
fn with_partition(line: HeaderValue, partition: Option<&Partition>) -> HeaderValue {
    let Some(partition) = partition else {
        return line;
    };
    let mut bytes = line.as_bytes().to_vec();
    bytes.extend_from_slice(&super::partition::parameter(partition));
    // Printable ASCII only: a line from `sfv`, then `;pk=:`, base64 and `:`.
    HeaderValue::from_bytes(&bytes).unwrap_or(line)
}

/// `t` of the `RateLimit` line: the time until more quota is available (draft-ietf-httpapi-
/// ratelimit-headers-10, "the number of seconds until additional quota ... is made available").
///
/// - A refusal: when the request would pass, the same wait as `Retry-After`, which must not point
///   earlier than `t` (the caller writes that).
/// - A fixed window: at its end, when the whole quota comes back.
/// - GCRA and the token bucket: when the next unit drips back. A bucket at level `L` (of a
///   capacity of `burst` units) drains one unit per emission interval `e`; `full_after` is the
///   time to drain it all, and `remaining` whole units are free, so one more is free once the
///   bucket has drained all but `burst - remaining - 1` units: `full_after - (burst - remaining
///   - 1) * e`.
/// - The sliding log and the sliding window: when their quota is whole again. More may come back
///   sooner (as each old request leaves the window), which a decision does not say: the answer is
///   never early, so a client that waits for it is not refused for having come back too soon.
fn more_after(decision: &Decision, rule: Option<&crate::policy::Rule>) -> std::time::Duration {
    let reset = decision.full_after();
    let Some(rule) = rule.filter(|rule| rule.algorithm().uses_burst()) else {
        return reset;
    };
    let quota = rule.quota();
    let emission = quota.period() / quota.limit().max(1);
    let full_units = decision
        .limit()
        .saturating_sub(decision.remaining())
        .saturating_sub(1);
    let still_full = emission.saturating_mul(u32::try_from(full_units).unwrap_or(u32::MAX));
    reset.saturating_sub(still_full)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use http::header::RETRY_AFTER;

    use super::*;
    use crate::decision::RuleVerdict;
    use crate::policy::{Policy, Rule};
    use crate::quota::Quota;

    fn policy() -> Policy {
        Policy::new([
            Rule::fixed_window("per-10s", Quota::new(5, Duration::from_secs(10))),
            Rule::gcra("burst", Quota::per_minute(100).with_burst(10)),
        ])
        .unwrap()
    }

    /// `decision` on [`policy`], made now.
    fn decided(decision: Decision) -> Decided {
        Decided {
            decision,
            policy: RatePolicy::new(policy()),
            at: SystemTime::now(),
            partition: None,
            shadow: false,
        }
    }

    /// The headers of `decision` on [`policy`], in `families`.
    fn stamped(decision: Decision, families: HeaderFamilies) -> HeaderMap {
        let mut headers = HeaderMap::new();
        decided(decision).apply(&mut headers, families);
        headers
    }

    #[test]
    fn an_allowed_decision_carries_every_family() {
        let verdict = RuleVerdict::new(
            Outcome::Allowed,
            2,
            3,
            Duration::from_micros(6_000_001),
            Duration::ZERO,
        );
        let decision = Decision::from_verdicts(
            &policy(),
            &[
                verdict,
                RuleVerdict::new(
                    Outcome::Allowed,
                    9,
                    1,
                    Duration::from_secs(1),
                    Duration::ZERO,
                ),
            ],
        );
        let headers = stamped(decision, HeaderFamilies::ALL);
        assert_eq!(headers[&TOTAL_REQUESTS], "3");
        assert_eq!(headers[&STATE], "Allow");
        assert_eq!(headers[&RATELIMIT], r#""per-10s";r=2;t=7"#);
        assert_eq!(headers[&X_LIMIT], "5");
        assert_eq!(headers[&X_REMAINING], "2");
        assert_eq!(headers[&X_USED], "3");
        assert!(headers.get(RETRY_AFTER).is_none());
        let expires = humantime::parse_rfc3339(headers[&EXPIRES_AT].to_str().unwrap()).unwrap();
        let ahead = expires
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        // Rounded up from 6.000001 s after the decision, read here a little later.
        assert!(
            ahead > Duration::from_secs(5) && ahead < Duration::from_micros(7_000_001),
            "{ahead:?}"
        );
        assert!(headers[&EXPIRES_AT].to_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn reset_instants_are_rounded_up_to_the_second_never_down() {
        let verdict =
            |full_after| RuleVerdict::new(Outcome::Allowed, 4, 1, full_after, Duration::ZERO);
        // 1_700_000_000 s after the epoch is 2023-11-14T22:13:20Z.
        let epoch = |seconds: f64| UNIX_EPOCH + Duration::from_secs_f64(seconds);
        for (at, full_after, expires_at, reset) in [
            // A fraction in the decision's instant: truncating would say 22:13:30, before the reset.
            (
                epoch(1_700_000_000.25),
                Duration::from_secs(10),
                "2023-11-14T22:13:31Z",
                "1700000011",
            ),
            // A fraction in the wait.
            (
                epoch(1_700_000_000.0),
                Duration::from_micros(9_000_001),
                "2023-11-14T22:13:30Z",
                "1700000010",
            ),
            // Exactly on a second: nothing to round.
            (
                epoch(1_700_000_000.0),
                Duration::from_secs(10),
                "2023-11-14T22:13:30Z",
                "1700000010",
            ),
        ] {
            let decision = Decision::from_verdicts(&policy(), &[verdict(full_after)]);
            let mut headers = HeaderMap::new();
            let decided = Decided {
                decision,
                policy: RatePolicy::new(policy()),
                at,
                partition: None,
                shadow: false,
            };
            decided.apply(&mut headers, HeaderFamilies::ALL);
            assert_eq!(headers[&EXPIRES_AT], expires_at, "{at:?} + {full_after:?}");
            assert_eq!(headers[&X_RESET], reset, "{at:?} + {full_after:?}");
        }
    }

    #[test]
    fn a_denial_says_deny_and_when_to_retry_rounded_up() {
        let verdict = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_millis(2_001),
        );
        let decision = Decision::from_verdicts(&policy(), &[verdict]);
        let headers = stamped(decision, HeaderFamilies::DEFAULT);
        assert_eq!(headers[&STATE], "Deny");
        assert_eq!(headers[RETRY_AFTER], "3");
        assert!(headers.get(&X_LIMIT).is_none());
        let tiny = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_micros(1),
        );
        let decision = Decision::from_verdicts(&policy(), &[tiny]);
        assert_eq!(stamped(decision, HeaderFamilies::NONE)[RETRY_AFTER], "1");
    }

    #[test]
    fn ietf_headers_append_and_custom_retry_after_is_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("60"));
        headers.insert(
            RATELIMIT_POLICY,
            HeaderValue::from_static(r#""inner";q=1;w=1"#),
        );
        let verdict = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_secs(2),
        );
        let decision = Decision::from_verdicts(&policy(), &[verdict]);
        decided(decision).apply(&mut headers, HeaderFamilies::IETF);
        assert_eq!(headers[RETRY_AFTER], "60");
        assert_eq!(headers.get_all(&RATELIMIT_POLICY).iter().count(), 2);
    }

    #[test]
    fn a_shadow_decision_says_shadow_and_nothing_clients_back_off_by() {
        let denied = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_secs(2),
        );
        let allowed = RuleVerdict::new(
            Outcome::Allowed,
            3,
            2,
            Duration::from_secs(8),
            Duration::ZERO,
        );
        for (verdict, state) in [(denied, "Shadow-Deny"), (allowed, "Shadow-Allow")] {
            let mut shadowed = decided(Decision::from_verdicts(&policy(), &[verdict]));
            shadowed.shadow = true;
            let mut headers = HeaderMap::new();
            shadowed.apply(&mut headers, HeaderFamilies::ALL);
            assert_eq!(headers[&STATE], state);
            assert_eq!(
                headers[&TOTAL_REQUESTS],
                if verdict.outcome == Outcome::Denied {
                    "5"
                } else {
                    "2"
                }
            );
            assert!(headers.contains_key(&EXPIRES_AT));
            assert_eq!(headers.len(), 3, "{headers:?}");
        }
    }
}
