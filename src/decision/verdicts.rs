//! A decision with every rule's own verdict: for a caller that reports each rule apart (the
//! gateway's Envoy service answers one status per descriptor), from the one store call that
//! decided.

use super::{Decision, Outcome, RuleVerdict};
use crate::policy::Policy;

/// A [`Decision`] and the verdict of each rule of its policy, in policy order:
/// [`Store::check_verdicts`](crate::Store::check_verdicts)'s answer.
///
/// Each rule's counts are as they stand after the request: counted when it passed, uncounted
/// when it was refused (a rule that would have admitted a request that another rule refused
/// tells what it has left, not what it would have had left). Its outcome is its own verdict on
/// the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdicts {
    decision: Decision,
    /// One per rule, or none while only the decision is known (inside the stores).
    rules: Vec<RuleVerdict>,
}

impl Verdicts {
    /// `decision` and its rules' verdicts, one per rule of its policy, in order.
    pub fn new(decision: Decision, rules: Vec<RuleVerdict>) -> Self {
        Self { decision, rules }
    }

    /// The decision, as [`Store::check`](crate::Store::check) answers it.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The decision, without the verdicts.
    pub fn into_decision(self) -> Decision {
        self.decision
    }

    /// Each rule's verdict, in policy order.
    pub fn rules(&self) -> &[RuleVerdict] {
        &self.rules
    }

    /// An answer that knows the decision only (a store's answer from state of its own, such as
    /// a remembered denial): its rules are read after it.
    pub(crate) fn decision_only(decision: Decision) -> Self {
        Self {
            decision,
            rules: Vec::new(),
        }
    }

    /// Whether every rule of `policy` has its verdict.
    pub(crate) fn complete(&self, policy: &Policy) -> bool {
        self.rules.len() == policy.rules().len()
    }
}

impl Decision {
    /// The reported rule's verdict, as this decision tells it: for a decision of one rule, that
    /// rule's whole verdict.
    pub(crate) fn reported_verdict(&self) -> RuleVerdict {
        let wait = match self.outcome {
            Outcome::Denied | Outcome::Allowed => self.wait_us,
            Outcome::Never => 0,
        };
        RuleVerdict::from_wait(
            self.outcome,
            self.remaining,
            self.used,
            self.full_after_us,
            wait,
        )
    }
}
