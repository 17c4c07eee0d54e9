//! What a caller of the store wants back: the decision ([`Store::check`](crate::Store::check)),
//! or the decision with every rule's verdict
//! ([`Store::check_verdicts`](crate::Store::check_verdicts)). One path decides both: the
//! batch asks the script's reply for the verdicts only when they are wanted, and an answer made
//! in process (the fallback's) knows the decision only.

use crate::decision::{Decision, Verdicts};
use crate::store::StoreFuture;

pub(in crate::store::redis) trait Answer: Send + 'static {
    /// Whether the rules' verdicts are wanted.
    const RULES: bool;

    /// From a decision alone.
    fn decided(decision: Decision) -> Self;

    /// From the script's reply: the decision, with its rules' verdicts when [`Self::RULES`].
    fn replied(verdicts: Verdicts) -> Self;

    /// From an answer of decisions alone (the fallback's, a quota lease's).
    fn of(decided: StoreFuture<Decision>) -> StoreFuture<Self>
    where
        Self: Sized;
}

impl Answer for Decision {
    const RULES: bool = false;

    fn decided(decision: Decision) -> Self {
        decision
    }

    fn replied(verdicts: Verdicts) -> Self {
        verdicts.into_decision()
    }

    fn of(decided: StoreFuture<Decision>) -> StoreFuture<Self> {
        decided
    }
}

impl Answer for Verdicts {
    const RULES: bool = true;

    fn decided(decision: Decision) -> Self {
        Verdicts::decision_only(decision)
    }

    fn replied(verdicts: Verdicts) -> Self {
        verdicts
    }

    fn of(mut decided: StoreFuture<Decision>) -> StoreFuture<Self> {
        match decided.take_ready() {
            Some(answer) => StoreFuture::ready(answer.map(Self::decided)),
            None => StoreFuture::new(async move { decided.await.map(Self::decided) }),
        }
    }
}
