//! [`FleetShedLayerBuilder`]: the fleet's capacity, each priority's share and the classifier.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;

use super::{FleetShares, FleetShedLayer, FleetShedRejection};
use crate::admission::{LayerSettings, rejection_setting, store_settings};
use crate::concurrency::settings::{SlotSettings, retry_hint_setting, slot_settings};
use crate::error::{ConcurrencyConfigError, ConfigError};
use crate::respond::HeaderFamilies;
use crate::shed::priority::{Classifier, Priority};

/// Configures a [`FleetShedLayer`]: [its page](FleetShedLayer) lists every setting with its
/// default. Required: the [`capacity`](Self::capacity). The limit's name defaults to `fleet`
/// (servers sharing a store and this name form one fleet), and no rate-limit headers are
/// written by default: a shed 503 carries only `Retry-After`.
#[must_use]
pub struct FleetShedLayerBuilder {
    common: LayerSettings<FleetShedRejection>,
    slots: SlotSettings,
    retry_after: Duration,
    capacity: Option<u32>,
    /// Percentages of the capacity, by `Priority::index`.
    shares: [u8; 4],
    classify: Option<Classifier>,
}

store_settings!(FleetShedLayerBuilder);
retry_hint_setting!(
    FleetShedLayerBuilder,
    "Default: 1 s: a slot frees when some request ends, which no one can predict, so pick a hint \
     near your typical request duration."
);
rejection_setting!(FleetShedLayerBuilder, FleetShedRejection);
slot_settings!(FleetShedLayerBuilder);

impl FleetShedLayer {
    /// A builder for a shedder.
    pub fn builder() -> FleetShedLayerBuilder {
        FleetShedLayerBuilder {
            common: LayerSettings::new(HeaderFamilies::NONE),
            slots: SlotSettings::new(Some("fleet")),
            retry_after: Duration::from_secs(1),
            capacity: None,
            shares: [50, 80, 90, 100],
            classify: None,
        }
    }
}

impl FleetShedLayerBuilder {
    /// How many requests the whole fleet serves at once (at least 1).
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The percentage of the capacity that requests of `priority` may fill (1 to 100). Defaults:
    /// low 50, normal 80, high 90, critical 100. A more important priority never gets a smaller
    /// share than a less important one. No share exceeds the capacity: at 100 % in use, every
    /// request is refused, critical ones included.
    pub fn share(mut self, priority: Priority, percent: u8) -> Self {
        self.shares[priority.index()] = percent;
        self
    }

    /// How each request's priority is decided from its head (default: every request is
    /// [`Priority::Normal`]). A priority already in the request extensions (put there by an outer
    /// shedder or an authentication layer) is used instead; the one decided is recorded there.
    /// Never take a priority from a header the client controls: every client would claim
    /// `Critical`.
    pub fn classify(
        mut self,
        classify: impl Fn(&Parts) -> Priority + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(classify));
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(self) -> Result<FleetShedLayer, ConfigError> {
        let FleetShedLayerBuilder {
            common,
            slots,
            retry_after,
            capacity,
            shares,
            classify,
        } = self;
        let capacity = match capacity {
            Some(0) | None => return Err(ConcurrencyConfigError::NoCapacity.into()),
            Some(capacity) => capacity,
        };
        let mut limits = [0; 4];
        for priority in Priority::ALL {
            let percent = shares[priority.index()];
            if !(1..=100).contains(&percent) {
                return Err(ConcurrencyConfigError::ShareOutOfRange {
                    priority: priority.as_str(),
                    percent,
                }
                .into());
            }
            // Floor, so a share never admits more than it says; at least one permit.
            limits[priority.index()] =
                ((u64::from(capacity) * u64::from(percent) / 100) as u32).max(1);
        }
        if shares.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err(ConcurrencyConfigError::SharesGrow { shares }.into());
        }
        let fleet_shares = FleetShares {
            capacity,
            limits,
            classify: classify.unwrap_or_else(|| Arc::new(|_: &Parts| Priority::Normal)),
        };
        let limiter = slots.limiter(fleet_shares, retry_after)?;
        common.finish(
            limiter,
            None,
            Some(FleetShedRejection::Unavailable),
            FleetShedRejection::default_response,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(layer: &FleetShedLayer) -> [u32; 4] {
        layer.core.admit.limits.limits
    }

    #[test]
    fn shares_become_thresholds_rounded_down_but_never_zero() {
        let layer = FleetShedLayer::builder().capacity(10).build().unwrap();
        assert_eq!(shares(&layer), [5, 8, 9, 10]);
        let small = FleetShedLayer::builder().capacity(1).build().unwrap();
        assert_eq!(shares(&small), [1, 1, 1, 1]);
        let odd = FleetShedLayer::builder()
            .capacity(7)
            .share(Priority::Normal, 75)
            .build()
            .unwrap();
        assert_eq!(shares(&odd), [3, 5, 6, 7]);
    }

    #[test]
    fn bad_shares_and_capacities_are_configuration_errors() {
        assert!(FleetShedLayer::builder().build().is_err());
        assert!(FleetShedLayer::builder().capacity(0).build().is_err());
        let zero = FleetShedLayer::builder()
            .capacity(10)
            .share(Priority::Low, 0);
        assert!(zero.build().is_err());
        let inverted = FleetShedLayer::builder()
            .capacity(10)
            .share(Priority::Low, 90);
        assert!(matches!(inverted.build(), Err(ConfigError::Concurrency(_))));
    }
}
