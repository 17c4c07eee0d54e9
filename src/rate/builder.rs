//! [`RateLimitLayerBuilder`]: the rules, store and cost of a rate limit.

use std::sync::Arc;

use http::request::Parts;

use super::limiter::{CostFn, RateLimiter};
use super::{RateLimitLayer, Rejection};
use crate::admission::{Configure, LayerBuilder};
use crate::error::ConfigError;
use crate::headers::{HeaderFamilies, RatePolicy};
use crate::policy::{Policy, Rule};
use crate::store::{MemoryStore, Store};

/// Configures a [`RateLimitLayer`]. Required: at least one [`rule`](Self::rule) and a
/// [`key`](Self::key); everything else has a default.
pub type RateLimitLayerBuilder = LayerBuilder<RateLimiter>;

/// What a rate limit adds to the settings every layer shares.
#[derive(Default)]
#[allow(unreachable_pub)]
pub struct Settings {
    rules: Vec<Rule>,
    store: Option<Arc<dyn Store>>,
    cost: Option<Arc<CostFn>>,
}

impl RateLimitLayer {
    /// A builder for a layer.
    pub fn builder() -> RateLimitLayerBuilder {
        LayerBuilder::new(Settings::default(), HeaderFamilies::DEFAULT)
    }

    /// The policy this layer enforces.
    pub fn policy(&self) -> &Policy {
        &self.core.admit.policy.policy
    }
}

impl LayerBuilder<RateLimiter> {
    /// Adds a rule. Several rules form one policy checked all or nothing: a request must fit every
    /// one of them, and a denied request consumes none.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.settings.rules.push(rule);
        self
    }

    /// Sets every rule at once, from a policy.
    pub fn policy(mut self, policy: &Policy) -> Self {
        self.settings.rules = policy.rules().to_vec();
        self
    }

    /// Where state is kept (default: a new [`MemoryStore`] for this layer). Share one store
    /// between layers by passing clones of it.
    pub fn store(mut self, store: impl Store) -> Self {
        self.settings.store = Some(Arc::new(store));
        self
    }

    /// The cost of each request (default 1): e.g. by route, by size, or 0 to only report.
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u32 + Send + Sync + 'static) -> Self {
        self.settings.cost = Some(Arc::new(cost));
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(mut self) -> Result<RateLimitLayer, ConfigError> {
        let settings = std::mem::take(&mut self.settings);
        let policy = Policy::new(settings.rules)?;
        let keys = self.keys(Rejection::MissingKey)?;
        let limiter = RateLimiter {
            store: settings
                .store
                .unwrap_or_else(|| Arc::new(MemoryStore::new())),
            policy: RatePolicy::new(policy),
            cost: settings.cost,
        };
        self.finish(
            limiter,
            keys,
            Some(Rejection::Unavailable),
            Rejection::default_response,
        )
    }
}

impl Configure for RateLimiter {
    type Settings = Settings;
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
