//! [`RateLimiter`]: a rate limit as a limiter over the admission core.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::{Extensions, HeaderValue};

use super::RateLimitRejection;
use super::plan::Plans;
use super::shadow::Shadow;
use crate::admission::{Admit, Sealed, Verdict};
use crate::decision::{Decision, Outcome};
use crate::key::Key;
use crate::policy::Rule;
use crate::respond::{Partition, Partitioner, RatePolicy, Report};
use crate::store::{Store, StoreError, StoreFuture};
use crate::telemetry::{Counted, RateMetrics};

pub(crate) type CostFn = dyn Fn(&Parts) -> u32 + Send + Sync;

/// The decisions of a [`RateLimitLayer`](crate::RateLimitLayer): one policy checked in one store
/// for each request's key. Made by its builder; the layer's type names it.
pub struct RateLimiter {
    pub(super) store: Arc<dyn Store>,
    /// The policies, each with its `RateLimit-Policy` made once: the default, and one per plan.
    pub(super) plans: Plans,
    pub(super) cost: Option<Arc<CostFn>>,
    /// Makes the `pk` of `RateLimit`, when the layer tells partition keys.
    pub(super) partitioner: Option<Partitioner>,
    /// Decide and count, but never refuse (see [`ShadowSwitch`](super::ShadowSwitch)).
    pub(super) shadow: Shadow,
    /// The keys of the decisions' metrics, per plan and rule.
    pub(super) metrics: RateMetrics,
    /// Whether an admitted request's response tells its decision: not when the layer writes no
    /// header family (`HeaderFamilies::NONE`), since every header of an admission belongs to a
    /// family (only a refusal's `Retry-After` does not). Its report, the time of the decision
    /// read and the policy shared, is then not made.
    pub(super) tells_admitted: bool,
}

impl Admit for RateLimiter {
    type Answer = Decision;
    /// The request's cost, the index of its plan's policy, and its partition key (when told).
    type Pending = (u32, usize, Option<Partition>);
    type Held = ();
    type Rejection = RateLimitRejection;

    const LIMITING: &'static str = crate::telemetry::RATE_LIMITING;

    #[inline]
    fn check(&self, key: Key, parts: &mut Parts) -> (StoreFuture<Decision>, Self::Pending) {
        let cost = self.cost.as_ref().map_or(1, |cost| cost(parts));
        let plan = self.plans.choose(parts);
        if let Some(name) = self.plans.plan(plan)
            && tracing::level_enabled!(tracing::Level::DEBUG)
        {
            // The decision's span (`Core::span`) is entered around this call.
            tracing::Span::current().record("plan", name.name());
        }
        let policy = &self.plans.get(plan).policy;
        let partition = self.partitioner.as_ref().map(|p| p.partition(&key));
        (
            self.store.check(&key, policy, cost),
            (cost, plan, partition),
        )
    }

    #[inline]
    fn decide(
        &self,
        decision: Decision,
        (cost, plan, partition): Self::Pending,
        extensions: &mut Extensions,
    ) -> Verdict<Self> {
        let policy = self.plans.get(plan);
        let rule = decision.rule_index();
        if self.shadow.is_on() {
            return self.shadowed(decision, plan, extensions);
        }
        let report = || Report::decided(decision.clone(), policy, partition);
        if decision.is_allowed() {
            let report = self.tells_admitted.then(report);
            self.metrics.decision(plan, rule, Counted::Allowed);
            if decision.remaining().saturating_mul(5) <= decision.limit() {
                self.metrics.near_limit(plan, rule);
            }
            let delay = decision.delay();
            if !delay.is_zero() {
                self.metrics.delay(plan, rule, delay);
                super::Waited::add(extensions, delay);
            }
            extensions.insert(decision);
            return Verdict::pass_after(delay, report, None);
        }
        let report = report();
        let outcome = match decision.outcome() {
            Outcome::Never => Counted::Never,
            _ => Counted::Denied,
        };
        self.metrics.decision(plan, rule, outcome);
        let rejection = RateLimitRejection::Limited {
            decision,
            policy: policy.policy.clone(),
            cost,
        };
        Verdict::refuse(Some(report), rejection)
    }

    fn failed(&self, (_, plan, _): Self::Pending, _: &StoreError) -> Option<HeaderValue> {
        Some(self.plans.get(plan).header.clone())
    }

    fn fails_closed(&self, (_, plan, _): &Self::Pending) -> bool {
        self.plans.get(*plan).policy.is_global()
    }

    fn announced(&self) -> Option<HeaderValue> {
        Some(self.plans.default_policy().header.clone())
    }

    fn names(&self) -> Vec<&str> {
        self.plans
            .default_policy()
            .policy
            .rules()
            .iter()
            .map(Rule::name)
            .collect()
    }

    #[inline]
    fn shadowed(&self) -> bool {
        self.shadow.is_on()
    }
}

impl RateLimiter {
    /// The verdict on `decision` in shadow mode: pass, whatever it says, and tell the client
    /// nothing unless the layer tells shadow decisions; what it would have done goes to the
    /// metrics and the log.
    fn shadowed(
        &self,
        decision: Decision,
        plan: usize,
        extensions: &mut Extensions,
    ) -> Verdict<Self> {
        let policy = self.plans.get(plan);
        let rule = rule(policy, &decision);
        let outcome = match decision.outcome() {
            Outcome::Allowed => Counted::ShadowAllowed,
            Outcome::Denied => Counted::ShadowDenied,
            Outcome::Never => Counted::ShadowNever,
        };
        self.metrics.decision(plan, decision.rule_index(), outcome);
        if !decision.is_allowed() {
            self.shadow
                .let_through(&decision, rule.map_or("", Rule::name));
        }
        let report = self
            .shadow
            .tells()
            .then(|| Report::shadowed(decision.clone(), policy));
        extensions.insert(decision);
        Verdict::pass(report, None)
    }
}

/// The name of the rule `decision` reports, for logs.
fn rule<'a>(policy: &'a RatePolicy, decision: &Decision) -> Option<&'a Rule> {
    policy.policy.rules().get(decision.rule_index())
}

impl Sealed for RateLimiter {}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("plans", &self.plans)
            .finish_non_exhaustive()
    }
}
