//! The answer of a store: may this request pass, and what should the client be told.
//!
//! Durations, not instants, cross the store boundary: hosts' clocks differ, a duration does not
//! care. Every duration is rounded *up* to the microsecond by the algorithms, and to the second by
//! the header writer, so a client that waits as long as it is told always gets in.

#[cfg(feature = "redis")]
mod in_process;
mod verdicts;

use std::fmt;
use std::time::Duration;

pub use self::verdicts::Verdicts;
pub use crate::algorithm::{Outcome, RuleVerdict};
use crate::policy::Policy;

/// The outcome of a rate-limit check, with what the response headers need.
///
/// For a multi-rule policy it reports the most restrictive rule: a rule that can never admit the
/// request, else the denying rule with the longest wait, else the rule with the fewest requests
/// remaining.
///
/// An admitted request carries its decision in its extensions. Not every request that reaches a
/// handler has one: when the store failed and the layer fails open
/// ([`FailureMode::Open`](crate::admission::FailureMode::Open)), or when the request had no key
/// and the layer skips such requests ([`MissingKey::Skip`](crate::admission::MissingKey::Skip)),
/// it passes unchecked and without a decision. So an axum handler takes it as `Option<Decision>`
/// (feature `axum`), and cannot take it as if it were always there: a plain
/// `Extension<Decision>` would make axum answer 500 whenever it is missing, turning a Redis outage
/// into an outage of the route.
///
/// ```
/// use axum::{Router, routing::get};
/// use tower_redis_ratelimit::Decision;
///
/// async fn handler(decision: Option<Decision>) -> String {
///     match decision {
///         Some(decision) => format!("{} requests left", decision.remaining()),
///         None => "not limited right now".to_owned(),
///     }
/// }
///
/// let app: Router = Router::new().route("/", get(handler));
/// ```
///
/// Kept small (40 bytes): it is returned by every check, so durations are held as microseconds.
#[derive(Clone)]
pub struct Decision {
    outcome: Outcome,
    /// Index of the reported rule in its policy (policies hold at most `MAX_RULES`).
    rule: u8,
    limit: u32,
    remaining: u64,
    used: u64,
    full_after_us: u64,
    /// Denied: how long until the request could pass. Allowed: how long it waits before it is
    /// served (0 unless a rule with a `max_delay` queued it). Never: 0.
    wait_us: u64,
    /// Decided by a fallback while the shared store failed.
    degraded: bool,
    /// The rules that refused the request, one bit per rule index (policies hold at most
    /// `MAX_RULES`, 8): 0 when it passed. Not part of equality (see below).
    refused_by: u8,
}

/// Equal decisions say the same to the client: outcome, reported rule, counts, waits, and
/// whether a fallback made them. Which other rules also refused is not compared: it depends on
/// what the store knows of rules that were not reported (a quota lease's answer knows only the
/// reported rule's wait).
impl PartialEq for Decision {
    fn eq(&self, other: &Self) -> bool {
        (
            self.outcome,
            self.rule,
            self.limit,
            self.remaining,
            self.used,
            self.full_after_us,
            self.wait_us,
            self.degraded,
        ) == (
            other.outcome,
            other.rule,
            other.limit,
            other.remaining,
            other.used,
            other.full_after_us,
            other.wait_us,
            other.degraded,
        )
    }
}

impl Eq for Decision {}

impl Decision {
    /// Combines one verdict per rule of `policy` (in policy order) into the decision to report.
    ///
    /// # Panics
    ///
    /// If `verdicts` is empty or longer than the policy: stores produce exactly one per rule.
    pub fn from_verdicts(policy: &Policy, verdicts: &[RuleVerdict]) -> Self {
        assert!(
            !verdicts.is_empty() && verdicts.len() <= policy.rules().len(),
            "one verdict per rule"
        );
        let mut combined = Combined::new();
        for verdict in verdicts {
            combined.add(*verdict);
        }
        combined.decision(policy)
    }

    /// Whether the request may pass.
    pub fn is_allowed(&self) -> bool {
        self.outcome == Outcome::Allowed
    }

    /// The verdict.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The index, in the policy, of the rule this decision reports. A store that made the
    /// decision for another policy than the layer's may report an index the layer's policy does
    /// not have: the layer then names no rule (no `RateLimit` header, no rule in a 429's body)
    /// rather than fail.
    pub fn rule_index(&self) -> usize {
        usize::from(self.rule)
    }

    /// The reported rule's capacity: its limit, or its burst for bucket algorithms.
    pub fn limit(&self) -> u64 {
        u64::from(self.limit)
    }

    /// How many more requests of cost 1 the reported rule admits right now.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How much of the reported rule's capacity is in use, this request included when it passed
    /// (`Rate-Limiting-Total-Requests`).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// How long until the reported rule's full capacity is available again.
    pub fn full_after(&self) -> Duration {
        Duration::from_micros(self.full_after_us)
    }

    /// The indexes, in its policy, of the rules that refused the request (every rule whose quota
    /// the request would exceed, not only the one reported; a denial remembered by the Redis
    /// store's denial cache names those whose own wait is not over, as the store would); none
    /// when it passed. The 429's `violated-policies` names them.
    pub fn refused_by(&self) -> impl Iterator<Item = usize> + '_ {
        (0..8).filter(move |index| self.refused_by & (1 << index) != 0)
    }

    /// Whether this decision came from a fallback while the shared store failed (a Redis store's
    /// [`Fallback`](crate::store::Fallback)): it counted this instance's share of the quota only
    /// (`Rate-Limiting-State: Degraded`).
    pub fn is_degraded(&self) -> bool {
        self.degraded
    }

    /// How long to wait before this request could pass; `None` when it passed, or when it never
    /// can ([`Outcome::Never`]).
    pub fn retry_after(&self) -> Option<Duration> {
        (self.outcome == Outcome::Denied).then(|| Duration::from_micros(self.wait_us))
    }

    /// How long an admitted request waits before it is served: zero unless a rule with a
    /// [`max_delay`](crate::Rule::with_max_delay) admitted it past its burst, when it is the
    /// longest of those rules' delays. Zero for a refusal. The layer waits this long before it
    /// calls the inner service.
    pub fn delay(&self) -> Duration {
        match self.outcome {
            Outcome::Allowed => Duration::from_micros(self.wait_us),
            _ => Duration::ZERO,
        }
    }
}

impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("outcome", &self.outcome)
            .field("rule", &self.rule)
            .field("limit", &self.limit)
            .field("remaining", &self.remaining)
            .field("used", &self.used)
            .field("full_after", &self.full_after())
            .field("retry_after", &self.retry_after())
            .field("delay", &self.delay())
            .finish()
    }
}

/// Rule verdicts combined one at a time, in policy order, into the decision to report: the
/// most restrictive verdict (the earliest of equals), and whether every rule admitted the request.
/// Stores that evaluate rules one by one feed it directly instead of collecting the verdicts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Combined {
    count: u8,
    all_allowed: bool,
    /// One bit per rule that did not admit the request.
    refused_by: u8,
    /// The longest delay of the rules so far (µs): what an admitted request waits.
    delay_us: u64,
    /// The most restrictive verdict so far and its rule index; meaningless while `count` is 0.
    rule: u8,
    verdict: RuleVerdict,
}

impl Combined {
    pub(crate) fn new() -> Self {
        Self {
            count: 0,
            all_allowed: true,
            refused_by: 0,
            delay_us: 0,
            rule: 0,
            verdict: RuleVerdict {
                outcome: Outcome::Allowed,
                remaining: 0,
                used: 0,
                full_after_us: 0,
                retry_after_us: 0,
                delay_us: 0,
            },
        }
    }

    /// The verdict of the next rule.
    #[inline]
    pub(crate) fn add(&mut self, verdict: RuleVerdict) {
        let allowed = verdict.outcome == Outcome::Allowed;
        self.all_allowed &= allowed;
        self.delay_us = self.delay_us.max(verdict.delay_us);
        if !allowed && self.count < 8 {
            self.refused_by |= 1 << self.count;
        }
        if self.count == 0 || restrictiveness(&verdict) > restrictiveness(&self.verdict) {
            self.rule = self.count;
            self.verdict = verdict;
        }
        self.count += 1;
    }

    /// Whether every rule so far admitted the request.
    pub(crate) fn all_allowed(&self) -> bool {
        self.all_allowed
    }

    /// The decision, once every rule of `policy` was added.
    pub(crate) fn decision(&self, policy: &Policy) -> Decision {
        let verdict = &self.verdict;
        let outcome = if self.all_allowed {
            Outcome::Allowed
        } else {
            verdict.outcome
        };
        Decision {
            outcome,
            rule: self.rule,
            limit: policy.rules()[usize::from(self.rule)].capacity(),
            remaining: verdict.remaining,
            used: verdict.used,
            full_after_us: verdict.full_after_us,
            wait_us: match outcome {
                Outcome::Denied => verdict.retry_after_us,
                Outcome::Allowed => self.delay_us,
                Outcome::Never => 0,
            },
            degraded: false,
            refused_by: if self.all_allowed { 0 } else { self.refused_by },
        }
    }
}

/// Orders verdicts from least to most restrictive.
fn restrictiveness(verdict: &RuleVerdict) -> (u8, u64, std::cmp::Reverse<u64>, u64) {
    match verdict.outcome {
        Outcome::Never => (2, 0, std::cmp::Reverse(0), 0),
        Outcome::Denied => (1, verdict.retry_after_us, std::cmp::Reverse(0), 0),
        Outcome::Allowed => (
            0,
            0,
            std::cmp::Reverse(verdict.remaining),
            verdict.full_after_us,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Quota, Rule};

    fn policy() -> Policy {
        Policy::new([
            Rule::gcra("second", Quota::per_second(10)),
            Rule::fixed_window("hour", Quota::per_hour(100)),
            Rule::fixed_window("day", Quota::per_day(1000)),
        ])
        .unwrap()
    }

    fn allowed(remaining: u64, reset_secs: u64) -> RuleVerdict {
        RuleVerdict::new(
            Outcome::Allowed,
            remaining,
            1,
            Duration::from_secs(reset_secs),
            Duration::ZERO,
        )
    }

    fn denied(retry_secs: u64) -> RuleVerdict {
        RuleVerdict::new(
            Outcome::Denied,
            0,
            10,
            Duration::from_secs(60),
            Duration::from_secs(retry_secs),
        )
    }

    #[test]
    fn all_allowed_reports_the_rule_with_fewest_remaining() {
        let decision =
            Decision::from_verdicts(&policy(), &[allowed(9, 1), allowed(3, 10), allowed(3, 20)]);
        assert!(decision.is_allowed());
        assert_eq!(decision.rule_index(), 2, "ties go to the longer reset");
        assert_eq!(decision.limit(), 1000);
        assert_eq!(decision.remaining(), 3);
        assert_eq!(decision.retry_after(), None);
    }

    #[test]
    fn a_denial_reports_the_longest_wait() {
        let decision = Decision::from_verdicts(&policy(), &[denied(1), allowed(0, 5), denied(30)]);
        assert_eq!(decision.outcome(), Outcome::Denied);
        assert_eq!(decision.rule_index(), 2);
        assert_eq!(decision.retry_after(), Some(Duration::from_secs(30)));
    }

    #[test]
    fn an_admitted_request_waits_the_longest_delay_of_its_rules_and_a_refused_one_none() {
        let delayed = |ms| allowed(0, 1).with_delay(Duration::from_millis(ms));
        let decision =
            Decision::from_verdicts(&policy(), &[delayed(200), allowed(3, 10), delayed(500)]);
        assert!(decision.is_allowed());
        assert_eq!(decision.delay(), Duration::from_millis(500));
        assert_eq!(decision.retry_after(), None);
        let refused = Decision::from_verdicts(&policy(), &[delayed(200), denied(3), allowed(3, 1)]);
        assert_eq!(refused.delay(), Duration::ZERO);
        assert_eq!(refused.retry_after(), Some(Duration::from_secs(3)));
        // Only an admitted verdict carries a delay.
        assert_eq!(denied(3).with_delay(Duration::from_secs(1)).delay_us, 0);
    }

    #[test]
    fn a_decision_stays_small() {
        // Returned by every check: moved through the store's future and the layer.
        assert!(std::mem::size_of::<Decision>() <= 40);
    }

    #[test]
    fn ties_go_to_the_earlier_rule() {
        let decision = Decision::from_verdicts(&policy(), &[denied(30), denied(30), denied(30)]);
        assert_eq!(decision.rule_index(), 0);
        let decision =
            Decision::from_verdicts(&policy(), &[allowed(3, 20), allowed(3, 20), allowed(9, 1)]);
        assert_eq!(decision.rule_index(), 0);
    }

    #[test]
    fn never_wins_over_denied_and_has_no_retry() {
        let never = RuleVerdict::new(
            Outcome::Never,
            10,
            0,
            Duration::ZERO,
            Duration::from_secs(5),
        );
        let decision = Decision::from_verdicts(&policy(), &[denied(9), never, allowed(1, 1)]);
        assert_eq!(decision.outcome(), Outcome::Never);
        assert_eq!(decision.rule_index(), 1);
        assert_eq!(decision.retry_after(), None);
    }
}
