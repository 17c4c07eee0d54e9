//! Plans: the policy a request is limited by, chosen per request (e.g. by the customer's plan),
//! with the layer's own rules as the default.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;

use crate::headers::RatePolicy;

/// The name of the plan a request belongs to, for an authentication layer to insert into the
/// request extensions; a [`RateLimitLayer`](crate::RateLimitLayer) with
/// [`plan`](crate::rate::RateLimitLayerBuilder::plan)s then limits the request by that plan's
/// policy (and by its default rules when the plan is missing or unknown).
///
/// ```
/// use tower_redis_ratelimit::rate::Plan;
///
/// let mut request = http::Request::get("/").body(()).unwrap();
/// request.extensions_mut().insert(Plan::new("pro"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Plan(Arc<str>);

impl Plan {
    /// A plan named `name`.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Plan(name.into())
    }

    /// The plan's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

pub(crate) type ChooseFn = dyn Fn(&Parts) -> Option<Plan> + Send + Sync;

/// A layer's policies: the default first, then one per plan.
pub(crate) struct Plans {
    policies: Box<[Arc<RatePolicy>]>,
    /// The plans' names, in the order of `policies[1..]`.
    names: Box<[Plan]>,
    choose: Arc<ChooseFn>,
}

impl Plans {
    pub(crate) fn new(
        default: Arc<RatePolicy>,
        plans: Vec<(Plan, Arc<RatePolicy>)>,
        choose: Option<Arc<ChooseFn>>,
    ) -> Self {
        let (names, policies): (Vec<Plan>, Vec<Arc<RatePolicy>>) = plans.into_iter().unzip();
        Self {
            policies: std::iter::once(default).chain(policies).collect(),
            names: names.into(),
            choose: choose.unwrap_or_else(|| {
                Arc::new(|parts: &Parts| parts.extensions.get::<Plan>().cloned())
            }),
        }
    }

    /// The default policy.
    #[inline]
    pub(crate) fn default_policy(&self) -> &Arc<RatePolicy> {
        &self.policies[0]
    }

    /// The index of the policy for a request.
    #[inline]
    pub(crate) fn choose(&self, parts: &Parts) -> usize {
        if self.names.is_empty() {
            return 0;
        }
        (self.choose)(parts)
            .and_then(|plan| self.names.iter().position(|name| *name == plan))
            .map_or(0, |index| index + 1)
    }

    /// Every policy: the default, then each plan's.
    pub(crate) fn policies(&self) -> impl Iterator<Item = &Arc<RatePolicy>> {
        self.policies.iter()
    }

    /// The policy at `index`, as [`choose`](Self::choose) gave it.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> &Arc<RatePolicy> {
        &self.policies[index]
    }
}

impl fmt::Debug for Plans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plans")
            .field("default", &self.policies[0].policy)
            .field("plans", &self.names)
            .finish_non_exhaustive()
    }
}
