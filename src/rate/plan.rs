//! Plans: the policy a request is limited by, chosen per request (e.g. by the customer's plan),
//! with the layer's own rules as the default.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;

use crate::log::Throttled;
use crate::respond::RatePolicy;

/// The name of the plan a request belongs to, for an authentication layer to insert into the
/// request extensions; a [`RateLimitLayer`](crate::RateLimitLayer) with
/// [`plan`](crate::rate::RateLimitLayerBuilder::plan)s then limits the request by that plan's
/// policy, and by its default rules when the request has no plan. A plan the layer does not have
/// (a misspelling, a tier added on one side only) is limited by the default rules too, but not
/// silently: it is counted in `ratelimit_unknown_plan_total` and logged (`warn`, at most once a
/// second per layer). The authentication layer must run first, outside the limit: see the
/// [rollout guide](crate::guide::rollout) for an axum middleware that does it.
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

    /// The plan's name, shared: the metrics' `plan` label takes a reference count, not a copy.
    pub(crate) fn shared_name(&self) -> &Arc<str> {
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
    /// Warnings of requests whose plan is none of `names`.
    unknown: Throttled,
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
            unknown: Throttled::new(Duration::from_secs(1)),
        }
    }

    /// The default policy.
    #[inline]
    pub(crate) fn default_policy(&self) -> &Arc<RatePolicy> {
        &self.policies[0]
    }

    /// The index of the policy for a request: its plan's, or the default (0) for a request of
    /// no plan, or of a plan this layer does not have, which is counted and logged. A layer
    /// without plans does not ask.
    #[inline]
    pub(crate) fn choose(&self, parts: &Parts) -> usize {
        if self.names.is_empty() {
            return 0;
        }
        let Some(plan) = (self.choose)(parts) else {
            return 0;
        };
        match self.names.iter().position(|name| *name == plan) {
            Some(index) => index + 1,
            None => {
                self.unknown(&plan);
                0
            }
        }
    }

    /// A request of `plan`, which is none of this layer's: limited by the default policy, but
    /// not silently (the plan's name is in the log, never in a label: it may come from a request).
    #[cold]
    fn unknown(&self, plan: &Plan) {
        crate::telemetry::unknown_plan();
        self.unknown.warn(|suppressed| {
            tracing::warn!(
                plan = plan.name(),
                plans = ?self.names.iter().map(Plan::name).collect::<Vec<_>>(),
                suppressed,
                "a request's plan is none of this limit's plans: limited by the default policy"
            );
        });
    }

    /// The plan whose policy is at `index`; none for the default.
    #[inline]
    pub(crate) fn plan(&self, index: usize) -> Option<&Plan> {
        index.checked_sub(1).and_then(|index| self.names.get(index))
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
