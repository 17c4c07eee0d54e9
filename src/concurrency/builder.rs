//! [`ConcurrencyLimitLayerBuilder`]: a per-key concurrency limit's settings.

use std::time::Duration;

use super::settings::{SlotSettings, retry_hint_setting, slot_settings};
use super::slot_limit::PerKey;
use super::{ConcurrencyLimitLayer, ConcurrencyLimitRejection};
use crate::admission::{LayerSettings, keyed_settings, rejection_setting, store_settings};
use crate::error::{ConcurrencyConfigError, ConfigError};
use crate::respond::HeaderFamilies;

/// Configures a [`ConcurrencyLimitLayer`]: [its page](ConcurrencyLimitLayer) lists every setting
/// with its default. Required: a [`name`](Self::name), a [`max_in_flight`](Self::max_in_flight)
/// and a [`key`](Self::key).
#[must_use]
pub struct ConcurrencyLimitLayerBuilder {
    common: LayerSettings<ConcurrencyLimitRejection>,
    slots: SlotSettings,
    retry_after: Duration,
    max_in_flight: Option<u32>,
}

keyed_settings!(ConcurrencyLimitLayerBuilder, ConcurrencyLimitRejection);
store_settings!(ConcurrencyLimitLayerBuilder);
retry_hint_setting!(
    ConcurrencyLimitLayerBuilder,
    "Default: 1 s: a slot frees when some request ends, which no one can predict, so pick a hint \
     near your typical request duration."
);
rejection_setting!(ConcurrencyLimitLayerBuilder, ConcurrencyLimitRejection);

slot_settings!(ConcurrencyLimitLayerBuilder);

impl ConcurrencyLimitLayer {
    /// A builder for a layer.
    pub fn builder() -> ConcurrencyLimitLayerBuilder {
        ConcurrencyLimitLayerBuilder {
            common: LayerSettings::new(HeaderFamilies::DEFAULT),
            slots: SlotSettings::new(None),
            retry_after: Duration::from_secs(1),
            max_in_flight: None,
        }
    }
}

impl ConcurrencyLimitLayerBuilder {
    /// How many requests of one key may be in flight at once (at least 1). Required.
    pub fn max_in_flight(mut self, max: u32) -> Self {
        self.max_in_flight = Some(max);
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(self) -> Result<ConcurrencyLimitLayer, ConfigError> {
        let ConcurrencyLimitLayerBuilder {
            mut common,
            slots,
            retry_after,
            max_in_flight,
        } = self;
        let max = match max_in_flight {
            Some(0) | None => return Err(ConcurrencyConfigError::NoMaxInFlight.into()),
            Some(max) => max,
        };
        let keys = common.keys(
            ConcurrencyLimitRejection::MissingKey,
            ConcurrencyLimitRejection::Denied,
        )?;
        let limiter = slots.limiter(PerKey { max }, retry_after)?;
        common.finish(
            limiter,
            Some(keys),
            Some(ConcurrencyLimitRejection::Unavailable),
            ConcurrencyLimitRejection::default_response,
        )
    }
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
            base().permit_ttl(Duration::from_millis(5)).build(),
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
