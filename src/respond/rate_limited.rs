//! The 429 of a rate limit: a request over its quota, or one that no wait would let in, with a
//! problem+json body naming the rule, the wait and the violated rules.

use std::fmt;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::headers::retry_seconds;
use super::problem::{Problem, problem_response};
use super::refusals::retry_sentence;
use crate::decision::{Decision, Outcome};
use crate::policy::{Policy, Rule};

/// The 429 of a request over its quota, or that no wait would let in.
pub(crate) fn rate_limited(decision: &Decision, policy: &Policy, cost: u32) -> Response<Bytes> {
    let inputs = BodyInputs {
        rule_index: decision.rule_index(),
        outcome: decision.outcome(),
        limit: decision.limit(),
        retry_secs: retry_seconds(decision.retry_after().unwrap_or_default()),
        refused_by: decision
            .refused_by()
            .fold(0_u16, |rules, index| rules | 1 << index),
        cost,
    };
    let body = LAST_429.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            // The policy is cloned only when a body is written: a hit costs no reference count.
            Some((made_for, made_from, body)) if made_for == policy && *made_from == inputs => {
                body.clone()
            }
            _ => {
                let body = inputs.body(policy);
                *last = Some((policy.clone(), inputs, body.clone()));
                body
            }
        }
    });
    problem_response(StatusCode::TOO_MANY_REQUESTS, body)
}

thread_local! {
    /// The last 429 body this thread wrote, and the policy and inputs it was written from. A
    /// client refused again and again is told the same until its wait changes by a second: the
    /// body is written once a second per thread instead of once per refusal (about half of a
    /// refusal's instructions, `benches/cost.rs layer-denied`). The policy is held, not just its
    /// address, so a policy dropped and another allocated in its place cannot be mistaken for it.
    static LAST_429: std::cell::RefCell<Option<(Policy, BodyInputs, Bytes)>> =
        const { std::cell::RefCell::new(None) };
}

/// Everything besides the policy a 429's body is made from: equal inputs, equal bytes.
#[derive(PartialEq)]
struct BodyInputs {
    rule_index: usize,
    outcome: Outcome,
    limit: u64,
    retry_secs: u64,
    /// The rules that refused, one bit per rule index.
    refused_by: u16,
    cost: u32,
}

impl BodyInputs {
    fn body(&self, policy: &Policy) -> Bytes {
        // A custom store may report a rule index of another policy: then no rule is named.
        let rules = policy.rules();
        let rule = rules.get(self.rule_index);
        let named = Named(rule);
        let detail = match self.outcome {
            Outcome::Never => {
                // A rule with a max_delay admits a cost past its burst, to wait.
                let queued = rule.map_or(0, Rule::queued);
                let most = match queued {
                    0 => format!("{} at once", self.limit),
                    queued => format!(
                        "{} at once, {queued} of them after a wait",
                        self.limit + queued
                    ),
                };
                format!(
                    "This request costs {} but the rate limit{named} admits at most {most}; \
                     it can never be allowed, so do not retry it.",
                    self.cost
                )
            }
            _ => format!(
                "Rate limit{named} exceeded. {}",
                retry_sentence(self.retry_secs)
            ),
        };
        let violated = (0..rules.len())
            .filter(|index| self.refused_by & (1 << index) != 0)
            .map(|index| rules[index].name().to_owned())
            .collect();
        let mut problem = Problem::<()>::quota_exceeded(detail, violated);
        problem.policy = rule.map(|rule| rule.name().to_owned());
        problem.limit = Some(self.limit);
        if self.outcome != Outcome::Never {
            problem.retry_after = Some(self.retry_secs);
        }
        problem.to_body()
    }
}

/// ` "name" (quota)` of the rule a 429 is about, or nothing when it is unknown; written into the
/// detail in place, without an allocation of its own.
struct Named<'a>(Option<&'a Rule>);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(rule) => write!(f, " \"{}\" ({})", rule.name(), rule.quota()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::decision::RuleVerdict;
    use crate::quota::Quota;
    use crate::respond::problem_body;

    #[test]
    fn a_429_names_the_rule_and_the_wait() {
        let body = refusal(
            Rule::fixed_window("hello", Quota::new(5, Duration::from_secs(10))),
            Duration::from_millis(6_500),
        );
        assert_eq!(body["policy"], "hello");
        assert_eq!(body["retry_after"], 7);
        assert_eq!(
            body["detail"],
            "Rate limit \"hello\" (5 per 10s) exceeded. Retry after 7 seconds."
        );
    }

    /// A 429 for `rule`, denied with `retry_after` to wait.
    fn refusal(rule: Rule, retry_after: Duration) -> serde_json::Value {
        let policy = Policy::try_from(rule).unwrap();
        let verdict = RuleVerdict::new(Outcome::Denied, 0, 5, retry_after, retry_after);
        let decision = Decision::from_verdicts(&policy, &[verdict]);
        let response = rate_limited(&decision, &policy, 1);
        problem_body(&response, StatusCode::TOO_MANY_REQUESTS)
    }

    /// The last body is reused only for the same inputs: another wait, another rule or another
    /// policy (even one of the same rule names) is written anew.
    #[test]
    fn a_reused_body_says_what_a_new_one_would() {
        let quota = Quota::new(5, Duration::from_secs(10));
        let first = refusal(Rule::fixed_window("a", quota), Duration::from_secs(7));
        let again = refusal(Rule::fixed_window("a", quota), Duration::from_millis(6_100));
        assert_eq!(first, again);
        let later = refusal(Rule::fixed_window("a", quota), Duration::from_secs(3));
        assert_eq!(later["retry_after"], 3);
        let other = refusal(Rule::fixed_window("b", quota), Duration::from_secs(3));
        assert_eq!(other["policy"], "b");
        assert_eq!(other["violated-policies"], serde_json::json!(["b"]));
        let other_quota = refusal(
            Rule::fixed_window("b", Quota::new(9, Duration::from_secs(10))),
            Duration::from_secs(3),
        );
        assert_eq!(
            other_quota["detail"],
            "Rate limit \"b\" (9 per 10s) exceeded. Retry after 3 seconds."
        );
    }

    #[test]
    fn a_request_that_can_never_pass_says_so_without_a_retry() {
        let policy =
            Policy::try_from(Rule::gcra("upload", Quota::per_second(10).with_burst(4))).unwrap();
        let verdict = RuleVerdict::new(Outcome::Never, 4, 0, Duration::ZERO, Duration::ZERO);
        let decision = Decision::from_verdicts(&policy, &[verdict]);
        let body = problem_body(
            &rate_limited(&decision, &policy, 9),
            StatusCode::TOO_MANY_REQUESTS,
        );
        assert!(body.get("retry_after").is_none());
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("can never be allowed"),
            "{body}"
        );
    }

    #[test]
    fn a_decision_about_a_rule_the_policy_lacks_names_no_rule() {
        // A custom store answered with a decision about the second rule of another policy.
        let other = Policy::new([
            Rule::gcra("a", Quota::per_second(10)),
            Rule::gcra("b", Quota::per_second(10).with_burst(4)),
        ])
        .unwrap();
        let policy = Policy::try_from(Rule::gcra("only", Quota::per_second(10))).unwrap();
        for (verdict, cost, detail) in [
            (
                RuleVerdict::new(
                    Outcome::Denied,
                    0,
                    4,
                    Duration::from_secs(1),
                    Duration::from_millis(100),
                ),
                1,
                "Rate limit exceeded. Retry after 1 second.",
            ),
            (
                RuleVerdict::new(Outcome::Never, 4, 0, Duration::ZERO, Duration::ZERO),
                9,
                "This request costs 9 but the rate limit admits at most 4 at once; \
                 it can never be allowed, so do not retry it.",
            ),
        ] {
            let allowed = RuleVerdict::new(Outcome::Allowed, 9, 1, Duration::ZERO, Duration::ZERO);
            let decision = Decision::from_verdicts(&other, &[allowed, verdict]);
            assert_eq!(decision.rule_index(), 1);
            let body = problem_body(
                &rate_limited(&decision, &policy, cost),
                StatusCode::TOO_MANY_REQUESTS,
            );
            assert_eq!(body["detail"], detail);
            assert!(body.get("policy").is_none(), "{body}");
            assert_eq!(body["limit"], 4);
        }
    }
}
