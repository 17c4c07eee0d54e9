//! The builders of concurrency limits: the settings every concurrency limit has (name, store,
//! lease), and a per-key limit's own.

use std::sync::Arc;
use std::time::Duration;

use super::limiter::ConcurrencyLimiter;
use super::limits::{Limits, PerKey};
use super::{ConcurrencyLimitLayer, Rejection};
use crate::admission::{Configure, Hinted, Keyed, LayerBuilder};
use crate::error::{ConcurrencyConfigError, ConfigError};
use crate::headers::HeaderFamilies;
use crate::policy::validate_name;
use crate::store::MemoryStore;
use crate::store::lease::{Lease, LeaseStore};

/// Configures a [`ConcurrencyLimitLayer`]. Required: a [`name`](LayerBuilder::name), a
/// [`max_in_flight`](LayerBuilder::max_in_flight) and a [`key`](LayerBuilder::key).
pub type ConcurrencyLimitLayerBuilder = LayerBuilder<ConcurrencyLimiter<PerKey>>;

/// What a concurrency limit adds to the settings every layer shares, and what its limits add.
#[allow(unreachable_pub)]
pub struct Settings<L: Limits> {
    name: Option<Arc<str>>,
    store: Option<Arc<dyn LeaseStore>>,
    lease: Duration,
    renew_every: Option<Duration>,
    pub(crate) limits: L::Settings,
}

impl<L: Limits> Settings<L> {
    /// The defaults: a 30 s lease renewed every 10 s.
    pub(crate) fn new(name: Option<&str>) -> Self {
        Self {
            name: name.map(Arc::from),
            store: None,
            lease: Duration::from_secs(30),
            renew_every: None,
            limits: L::Settings::default(),
        }
    }
}

impl ConcurrencyLimitLayer {
    /// A builder for a layer.
    pub fn builder() -> ConcurrencyLimitLayerBuilder {
        LayerBuilder::new(Settings::new(None), HeaderFamilies::DEFAULT)
    }
}

impl<L: Limits> LayerBuilder<ConcurrencyLimiter<L>> {
    /// The limit's name: in the headers and the storage keys (1 to 64 characters of
    /// `A-Z a-z 0-9 . _ -`). Layers with the same name and store share their slots.
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.settings.name = Some(name.into());
        self
    }

    /// Where permits are held (default: a new [`MemoryStore`] for this layer, which limits this
    /// server alone). Pass a `RedisStore` to share the limit between servers.
    pub fn store(mut self, store: impl LeaseStore) -> Self {
        self.settings.store = Some(Arc::new(store));
        self
    }

    /// How long a permit survives without renewal (default 30 s, between
    /// [`MIN_LEASE`](crate::store::lease::MIN_LEASE) and
    /// [`MAX_LEASE`](crate::store::lease::MAX_LEASE)): the longest a crashed server's slots stay
    /// taken.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// How often the store's heartbeat renews live permits (default: a third of the lease).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.settings.renew_every = Some(every);
        self
    }

    /// The limiter of `limits` with these settings, validated.
    pub(crate) fn limiter(&mut self, limits: L) -> Result<ConcurrencyLimiter<L>, ConfigError> {
        let retry_after = self.retry_hint();
        let settings = &mut self.settings;
        let name = settings
            .name
            .clone()
            .ok_or(ConcurrencyConfigError::MissingName)?;
        validate_name(&name)?;
        let mut lease = Lease::new(settings.lease);
        if let Some(every) = settings.renew_every {
            lease = lease.with_renewal_every(every);
        }
        lease.validate()?;
        Ok(ConcurrencyLimiter {
            name,
            store: settings
                .store
                .take()
                .unwrap_or_else(|| Arc::new(MemoryStore::new())),
            limits,
            lease,
            retry_after,
        })
    }
}

impl LayerBuilder<ConcurrencyLimiter<PerKey>> {
    /// How many requests of one key may be in flight at once (at least 1).
    pub fn max_in_flight(mut self, max: u32) -> Self {
        self.settings.limits = Some(max);
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(mut self) -> Result<ConcurrencyLimitLayer, ConfigError> {
        let max = match self.settings.limits {
            Some(0) | None => {
                return Err(ConcurrencyConfigError::NoMaxInFlight.into());
            }
            Some(max) => max,
        };
        let keys = self.keys(Rejection::MissingKey, Rejection::Denied)?;
        let limiter = self.limiter(PerKey { max })?;
        self.finish(
            limiter,
            keys,
            Some(Rejection::Unavailable),
            Rejection::default_response,
        )
    }
}

impl Keyed for ConcurrencyLimiter<PerKey> {}

impl<L: Limits> Configure for ConcurrencyLimiter<L> {
    type Settings = Settings<L>;
}

impl<L: Limits> Hinted for ConcurrencyLimiter<L> {
    const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::GlobalKey;

    #[test]
    fn build_reports_what_is_missing_or_wrong() {
        let base = || {
            ConcurrencyLimitLayer::builder()
                .name("ws")
                .max_in_flight(2)
                .key(GlobalKey::new("g"))
        };
        assert!(base().build().is_ok());
        assert!(matches!(
            base().max_in_flight(0).build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            ConcurrencyLimitLayer::builder()
                .max_in_flight(1)
                .key(GlobalKey::new("g"))
                .build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            base().name("no spaces").build(),
            Err(ConfigError::InvalidRuleName { .. })
        ));
        assert_eq!(
            ConcurrencyLimitLayer::builder()
                .name("ws")
                .max_in_flight(1)
                .build()
                .unwrap_err(),
            ConfigError::MissingKeyExtractor
        );
        assert!(matches!(
            base().lease(Duration::from_millis(5)).build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            base().renew_every(Duration::from_secs(30)).build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            base().deadline(Duration::ZERO).build(),
            Err(ConfigError::DeadlineOutOfRange(_))
        ));
    }
}
