//! [`RateLimiter`]: a rate limit as a policy over the admission core.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::{Extensions, HeaderValue};

use super::Rejection;
use crate::admission::{Admit, Keyed, Keys, Stored, Verdict};
use crate::decision::Decision;
use crate::headers::{RatePolicy, Report};
use crate::key::Key;
use crate::policy::Rule;
use crate::store::{Store, StoreError, StoreFuture};

pub(crate) type CostFn = dyn Fn(&Parts) -> u32 + Send + Sync;

/// The decisions of a [`RateLimitLayer`](crate::RateLimitLayer): one policy checked in one store
/// for each request's key. Made by its builder; the layer's type names it.
pub struct RateLimiter {
    pub(super) store: Arc<dyn Store>,
    /// The policy, with its `RateLimit-Policy` made once: it is the same on every response.
    pub(super) policy: Arc<RatePolicy>,
    pub(super) cost: Option<Arc<CostFn>>,
}

impl Admit for RateLimiter {
    type Answer = Decision;
    /// The request's cost.
    type Pending = u32;
    type Held = ();
    type Rejection = Rejection;
    type Keys = Keys<Rejection>;
    type Key = Key;

    const LIMITING: &'static str = "rate limiting";

    #[inline]
    fn check(&self, key: Key, parts: &mut Parts) -> (StoreFuture<Decision>, u32) {
        let cost = self.cost.as_ref().map_or(1, |cost| cost(parts));
        (self.store.check(&key, &self.policy.policy, cost), cost)
    }

    #[inline]
    fn decide(&self, decision: Decision, cost: u32, extensions: &mut Extensions) -> Verdict<Self> {
        let report = Report::decided(decision.clone(), &self.policy);
        if decision.is_allowed() {
            extensions.insert(decision);
            return Verdict::pass(Some(report), None);
        }
        let rejection = Rejection::Limited {
            decision,
            policy: self.policy.policy.clone(),
            cost,
        };
        Verdict::refuse(Some(report), rejection)
    }

    fn failed(&self, _: u32, _: &StoreError) -> Option<HeaderValue> {
        Some(self.policy.header.clone())
    }

    fn announced(&self) -> Option<HeaderValue> {
        Some(self.policy.header.clone())
    }

    fn names(&self) -> Vec<&str> {
        self.policy.policy.rules().iter().map(Rule::name).collect()
    }
}

impl Keyed for RateLimiter {}

impl Stored for RateLimiter {}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("policy", &self.policy.policy)
            .finish_non_exhaustive()
    }
}
