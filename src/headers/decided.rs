//! The headers of a rate-limit decision.
//!
//! | family | headers |
//! |---|---|
//! | [`HeaderFamilies::RATE_LIMITING`] | `Rate-Limiting-Total-Requests`, `Rate-Limiting-State` (`Allow`, `Deny`), `Rate-Limiting-Expires-At` (RFC 3339, UTC, rounded up to the second) |
//! | [`HeaderFamilies::IETF`] | `RateLimit-Policy: "name";q=5;w=10`, `RateLimit: "name";r=2;t=7` |
//! | [`HeaderFamilies::X_RATELIMIT`] | `X-RateLimit-Limit`, `-Remaining`, `-Used`, `-Reset` (Unix epoch seconds, rounded up) |
//!
//! And `Retry-After` on a denial, except for a request that can never pass ([`Outcome::Never`]):
//! no wait would let it in, so no wait is named.

use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use sfv::{KeyRef, ListSerializer};

use super::HeaderFamilies;
use super::format::{
    epoch_seconds, fill, header_value, retry_after, rfc3339, sf_integer, sf_name, whole_seconds,
};
use super::names::{
    EXPIRES_AT, RATELIMIT, RATELIMIT_POLICY, STATE, TOTAL_REQUESTS, X_LIMIT, X_REMAINING, X_RESET,
    X_USED,
};
use super::quota_policy::RatePolicy;
use crate::decision::{Decision, Outcome};
use crate::policy::Rule;

/// What a rate-limit decision tells the client: the decision on `policy`, made `at`.
#[derive(Clone, Debug)]
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    pub(crate) policy: Arc<RatePolicy>,
    pub(crate) at: SystemTime,
}

impl Decided {
    pub(crate) fn apply(self, headers: &mut HeaderMap, families: HeaderFamilies) {
        let Decided {
            decision,
            policy,
            at,
        } = self;
        // The exact instant; `rfc3339` and `epoch_seconds` round it up, never down, so a client
        // that waits until then finds the period over.
        let reset_at = at + decision.reset_after();
        if families.contains(HeaderFamilies::RATE_LIMITING) {
            let state = if decision.is_allowed() {
                "Allow"
            } else {
                "Deny"
            };
            fill(headers, TOTAL_REQUESTS, HeaderValue::from(decision.used()));
            fill(headers, STATE, HeaderValue::from_static(state));
            fill(headers, EXPIRES_AT, rfc3339(reset_at));
        }
        if families.contains(HeaderFamilies::IETF) {
            headers.append(RATELIMIT_POLICY, policy.header.clone());
            // A custom store may report a rule index of another policy: without the rule there is
            // no line to write, and a line about another rule would mislead.
            if let Some(rule) = policy.policy.rules().get(decision.rule_index()) {
                headers.append(RATELIMIT, limit_line(rule, &decision));
            }
        }
        if families.contains(HeaderFamilies::X_RATELIMIT) {
            fill(headers, X_LIMIT, HeaderValue::from(decision.limit()));
            fill(
                headers,
                X_REMAINING,
                HeaderValue::from(decision.remaining()),
            );
            fill(headers, X_USED, HeaderValue::from(decision.used()));
            fill(headers, X_RESET, HeaderValue::from(epoch_seconds(reset_at)));
        }
        if decision.outcome() == Outcome::Denied {
            retry_after(headers, decision.retry_after().unwrap_or_default());
        }
    }
}

/// `RateLimit`: the reported rule, as `"name";r=<remaining>;t=<seconds until reset>`.
fn limit_line(rule: &Rule, decision: &Decision) -> HeaderValue {
    let mut list = ListSerializer::new();
    list.bare_item(sf_name(rule.name()))
        .parameter(KeyRef::constant("r"), sf_integer(decision.remaining()))
        .parameter(
            KeyRef::constant("t"),
            sf_integer(whole_seconds(decision.reset_after()).as_secs()),
        );
    header_value(list.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use http::header::RETRY_AFTER;

    use super::*;
    use crate::decision::RuleVerdict;
    use crate::policy::Policy;
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
            |reset_after| RuleVerdict::new(Outcome::Allowed, 4, 1, reset_after, Duration::ZERO);
        // 1_700_000_000 s after the epoch is 2023-11-14T22:13:20Z.
        let epoch = |seconds: f64| UNIX_EPOCH + Duration::from_secs_f64(seconds);
        for (at, reset_after, expires_at, reset) in [
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
            let decision = Decision::from_verdicts(&policy(), &[verdict(reset_after)]);
            let mut headers = HeaderMap::new();
            let decided = Decided {
                decision,
                policy: RatePolicy::new(policy()),
                at,
            };
            decided.apply(&mut headers, HeaderFamilies::ALL);
            assert_eq!(headers[&EXPIRES_AT], expires_at, "{at:?} + {reset_after:?}");
            assert_eq!(headers[&X_RESET], reset, "{at:?} + {reset_after:?}");
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
}
