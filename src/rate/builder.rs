//! [`RateLimitLayerBuilder`]: the rules, store and cost of a rate limit.

use std::sync::Arc;

use http::request::Parts;

use super::limiter::{CostFn, RateLimiter};
use super::plan::{ChooseFn, Plan, Plans};
use super::shadow::{Shadow, ShadowSwitch};
use super::{RateLimitLayer, RateLimitRejection};
use crate::admission::{LayerSettings, keyed_settings, rejection_setting, store_settings};
use crate::error::ConfigError;
use crate::policy::{Policy, Rule};
use crate::respond::{HeaderFamilies, Partitioner, RatePolicy};
use crate::store::{MemoryStore, Store};
use crate::telemetry::RateMetrics;

/// Configures a [`RateLimitLayer`]: [its page](RateLimitLayer) lists every setting with its
/// default. Required: at least one [`rule`](Self::rule) (or a [`policy`](Self::policy)) and a
/// [`key`](Self::key).
#[must_use]
pub struct RateLimitLayerBuilder {
    common: LayerSettings<RateLimitRejection>,
    rules: Vec<Rule>,
    /// Whether the rules form a global policy (set by `policy` from a `Policy::global`).
    global: bool,
    store: Option<Arc<dyn Store>>,
    cost: Option<Arc<CostFn>>,
    /// The layer's shadow switch; a new one, off, unless given.
    shadow: Option<ShadowSwitch>,
    shadow_headers: bool,
    plans: Vec<(Plan, Policy)>,
    choose_plan: Option<Arc<ChooseFn>>,
    partition_secret: Option<Vec<u8>>,
}

keyed_settings!(RateLimitLayerBuilder, RateLimitRejection);
store_settings!(RateLimitLayerBuilder);
rejection_setting!(RateLimitLayerBuilder, RateLimitRejection);

impl RateLimitLayer {
    /// A builder for a layer.
    pub fn builder() -> RateLimitLayerBuilder {
        RateLimitLayerBuilder {
            common: LayerSettings::new(HeaderFamilies::DEFAULT),
            rules: Vec::new(),
            global: false,
            store: None,
            cost: None,
            shadow: None,
            shadow_headers: false,
            plans: Vec::new(),
            choose_plan: None,
            partition_secret: None,
        }
    }

    /// The policy this layer enforces (its default one, when it has [plans](RateLimitLayerBuilder::plan)).
    pub fn policy(&self) -> &Policy {
        &self.core.admit.plans.default_policy().policy
    }

    /// This layer's shadow switch: on, the layer is in shadow mode; off, it enforces. Turn it
    /// either way at run time (see [`ShadowSwitch`]); layers built with clones of one switch
    /// (`RateLimitLayerBuilder::shadow_switch`) turn together.
    pub fn shadow_switch(&self) -> &ShadowSwitch {
        self.core.admit.shadow.switch()
    }
}

impl RateLimitLayerBuilder {
    /// Adds a rule. Several rules form one policy checked all or nothing: a request must fit every
    /// one of them, and a denied request consumes none.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Sets every rule at once, from a policy (a [global](Policy::global) one stays global).
    pub fn policy(mut self, policy: &Policy) -> Self {
        self.rules = policy.rules().to_vec();
        self.global = policy.is_global();
        self
    }

    /// Where state is kept (default: a new [`MemoryStore`] for this layer). Share one store
    /// between layers by passing clones of it.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The cost of each request (default 1): e.g. by route, by size, or 0 to only report.
    ///
    /// Inside axum's `Router::nest`, the closure sees the path without the nested router's
    /// prefix, as the nested router does; axum's `OriginalUri` in the extensions holds the whole
    /// one (see [`key::from_fn`](crate::key::from_fn#inside-routernest)).
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u32 + Send + Sync + 'static) -> Self {
        self.cost = Some(Arc::new(cost));
        self
    }

    /// Starts the layer in shadow mode (`true`) or enforcing (`false`, the default), with a
    /// [`ShadowSwitch`] of its own that [`RateLimitLayer::shadow_switch`] returns, to turn it
    /// either way at run time.
    ///
    /// In shadow mode the layer decides and counts every request as it would otherwise, but
    /// refuses none (not for its quota, nor for a missing key, a key on its deny list or a failed
    /// store) and writes none of its headers, so that no client changes what it does: no 429, no
    /// `Retry-After`, no `RateLimit` saying nothing remains. What it would have done goes to the
    /// metrics (`outcome` `shadow_allowed`, `shadow_denied`, `shadow_never` of
    /// `ratelimit_decisions_total`) and the logs (each refusal let through at `debug`, at most one
    /// line a second at `info` with a count of the others); a handler still gets the
    /// [`Decision`](crate::Decision) (`Option<Decision>` in axum). For rolling out a new limit:
    /// watch what it would refuse, then enforce it.
    ///
    /// The last of `shadow` and [`shadow_switch`](Self::shadow_switch) called is the layer's
    /// switch.
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = Some(ShadowSwitch::new(on));
        self
    }

    /// Makes `switch` this layer's shadow switch: the layer is in shadow mode (see
    /// [`shadow`](Self::shadow)) while the switch is on and enforces while it is off, together
    /// with every other layer given a clone of it. Replaces the switch of an earlier
    /// [`shadow`](Self::shadow) call.
    pub fn shadow_switch(mut self, switch: ShadowSwitch) -> Self {
        self.shadow = Some(switch);
        self
    }

    /// In shadow mode, tells the client what the layer decided (default off: nothing): the
    /// `Rate-Limiting-*` headers with `Rate-Limiting-State: Shadow-Allow` or `Shadow-Deny`, and
    /// never `RateLimit`, `RateLimit-Policy`, `X-RateLimit-*` or `Retry-After`, which clients back
    /// off by. For seeing a shadow limit at work from a client (a test, `curl`); see the
    /// [headers reference](crate::guide::headers). Needs the `Rate-Limiting-*` family in
    /// [`headers`](Self::headers) (there by default).
    pub fn shadow_headers(mut self, tell: bool) -> Self {
        self.shadow_headers = tell;
        self
    }

    /// A plan: requests of plan `name` are limited by `policy` instead of the layer's rules
    /// (which stay the default, for requests of no plan or an unknown one). The plan of a
    /// request is the [`Plan`] in its extensions (an authentication layer puts it there), or
    /// what [`choose_plan`](Self::choose_plan) says.
    ///
    /// A plan's rules may share names with the default's: a client moved to another plan keeps
    /// its count where the time base of its state stays the same (see
    /// [`Rule`](crate::Rule)'s Redis keys), and is measured against its new quota at once.
    ///
    /// ```
    /// use tower_redis_ratelimit::key::HeaderKey;
    /// use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, Rule};
    ///
    /// let pro = Policy::try_from(Rule::gcra("api", Quota::per_minute(1_000)))?;
    /// let layer = RateLimitLayer::builder()
    ///     .rule(Rule::gcra("api", Quota::per_minute(60)))
    ///     .plan("pro", &pro)
    ///     .key(HeaderKey::new("x-api-key"))
    ///     .build()?;
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn plan(mut self, name: impl Into<Arc<str>>, policy: &Policy) -> Self {
        self.plans.push((Plan::new(name), policy.clone()));
        self
    }

    /// How a request's plan is found (default: the [`Plan`] in its extensions).
    pub fn choose_plan(
        mut self,
        choose: impl Fn(&Parts) -> Option<Plan> + Send + Sync + 'static,
    ) -> Self {
        self.choose_plan = Some(Arc::new(choose));
        self
    }

    /// Adds the IETF draft's partition key to `RateLimit` (`"api";r=4;t=10;pk=:...:`), so a
    /// client can tell which partition of a quota (whose key) a response speaks of. The key
    /// itself is never shown: `pk` is a 128-bit digest (SHA-256) of the key and `secret`. Give
    /// every instance the same secret, so that they agree; keep it secret, so that no one can
    /// find a key (an address, a user id) by hashing guesses.
    pub fn partition_key(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.partition_secret = Some(secret.as_ref().to_vec());
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(self) -> Result<RateLimitLayer, ConfigError> {
        let RateLimitLayerBuilder {
            mut common,
            rules,
            global,
            store,
            cost,
            shadow,
            shadow_headers,
            plans,
            choose_plan,
            partition_secret,
        } = self;
        let policy = Policy::of(rules, global)?;
        for (index, (plan, _)) in plans.iter().enumerate() {
            if plans[..index].iter().any(|(other, _)| other == plan) {
                return Err(ConfigError::DuplicatePlan(plan.name().to_owned()));
            }
        }
        let keys = common.keys(RateLimitRejection::MissingKey, RateLimitRejection::Denied)?;
        let store = store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        if let Some(timeout) = store.fallback_timeout()
            && timeout >= common.deadline
        {
            return Err(ConfigError::FallbackAfterDeadline {
                timeout,
                deadline: common.deadline,
            });
        }
        let plans = Plans::new(
            RatePolicy::new(policy),
            plans
                .into_iter()
                .map(|(name, policy)| (name, RatePolicy::new(policy)))
                .collect(),
            choose_plan,
        );
        let metrics = RateMetrics::new(plans.policies().enumerate().map(|(index, policy)| {
            let plan = plans.plan(index).map(Plan::shared_name);
            (plan, policy.policy.rules())
        }));
        let limiter = RateLimiter {
            store,
            plans,
            metrics,
            tells_admitted: common.headers != HeaderFamilies::NONE,
            cost,
            shadow: Shadow::new(shadow.unwrap_or_default(), shadow_headers),
            partitioner: partition_secret.map(|secret| Partitioner::new(&secret)),
        };
        common.finish(
            limiter,
            Some(keys),
            Some(RateLimitRejection::Unavailable),
            RateLimitRejection::default_response,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::key::GlobalKey;
    use crate::quota::Quota;

    #[test]
    fn build_reports_what_is_missing_or_wrong() {
        let err = RateLimitLayer::builder()
            .key(GlobalKey::new("g"))
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::EmptyPolicy);
        let err = RateLimitLayer::builder()
            .rule(Rule::gcra("a", Quota::per_second(1)))
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::MissingKeyExtractor);
        let err = RateLimitLayer::builder()
            .rule(Rule::gcra("a", Quota::per_second(1)))
            .key(GlobalKey::new("g"))
            .deadline(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::DeadlineOutOfRange(Duration::ZERO));
    }
}
