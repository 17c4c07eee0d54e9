//! [`UtilizationShedLayerBuilder`]: how utilisation is measured, the control law, and who is shed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::request::Parts;
use tokio::time::Instant;

use super::UtilizationShedLayer;
use super::in_flight::InFlight;
use super::shedder::{RandomFn, Source, UtilizationFn, UtilizationShedder};
use crate::admission::{Configure, Hinted, LayerBuilder, NoKeys};
use crate::error::{ConfigError, ShedConfigError};
use crate::headers::HeaderFamilies;
use crate::log::Throttled;
use crate::shed::priority::{Classifier, Priority};
use crate::shed::{ControlLaw, ShedControl, Shedding};

/// Configures a [`UtilizationShedLayer`]. Required: a [`capacity`](LayerBuilder::capacity) or a
/// [`utilization`](LayerBuilder::utilization) function; everything else has a default.
pub type UtilizationShedLayerBuilder = LayerBuilder<UtilizationShedder>;

/// What a utilisation shedder adds to the settings every layer shares.
#[allow(unreachable_pub)]
pub struct Settings {
    capacity: Option<usize>,
    utilization: Option<Arc<UtilizationFn>>,
    classify: Option<Classifier>,
    law: ControlLaw,
    random: Option<Arc<RandomFn>>,
}

impl UtilizationShedLayer {
    /// A builder for a layer.
    pub fn builder() -> UtilizationShedLayerBuilder {
        let settings = Settings {
            capacity: None,
            utilization: None,
            classify: None,
            law: ControlLaw::default(),
            random: None,
        };
        LayerBuilder::new(settings, HeaderFamilies::NONE)
    }
}

impl LayerBuilder<UtilizationShedder> {
    /// Measures utilisation as the requests in flight through the layer divided by `capacity`:
    /// how many this instance serves at once before it slows down (its worker count, or the
    /// concurrency at which latency starts to climb in a load test). At least 1.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.settings.capacity = Some(capacity);
        self
    }

    /// Measures utilisation with your function instead, read at every request: 0 is idle, 1 is
    /// saturated (e.g. busy workers over all workers, or CPU load). Keep it cheap (read a value a
    /// background task refreshes). Values above 1 count as 1, below 0 as 0; NaN leaves the
    /// shedding amount where it is.
    pub fn utilization(mut self, utilization: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.settings.utilization = Some(Arc::new(utilization));
        self
    }

    /// Decides each request's [`Priority`] from its head (default: every request is
    /// [`Priority::Normal`]). A priority that an earlier layer put into the request extensions is
    /// kept; the one decided here is put there for later layers and the handler. Never take a
    /// priority from a header the client controls: every client would claim `Critical`.
    pub fn classify(
        mut self,
        classify: impl Fn(&Parts) -> Priority + Send + Sync + 'static,
    ) -> Self {
        self.settings.classify = Some(Arc::new(classify));
        self
    }

    /// The control law's constants (default: Stripe's, [`ControlLaw::STRIPE`]).
    pub fn control_law(mut self, law: ControlLaw) -> Self {
        self.settings.law = law;
        self
    }

    /// The source of uniform random numbers in `[0, 1)` that pick which requests to shed (default:
    /// a fast thread-local generator). A request is shed when its number is below its priority's
    /// drop probability; give a fixed sequence to make tests deterministic.
    pub fn random_source(mut self, random: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.settings.random = Some(Arc::new(random));
        self
    }

    /// Validates the configuration and builds the layer. The control starts rested as of now.
    pub fn build(mut self) -> Result<UtilizationShedLayer, ConfigError> {
        let retry_after = self.retry_hint();
        let settings = &mut self.settings;
        let source = match (settings.capacity, settings.utilization.take()) {
            (Some(0), _) => {
                return Err(ShedConfigError::ZeroCapacity.into());
            }
            (Some(capacity), None) => Source::Capacity(capacity),
            (None, Some(function)) => Source::Function(function),
            (None, None) => {
                return Err(ShedConfigError::NoUtilization.into());
            }
            (Some(_), Some(_)) => {
                return Err(ShedConfigError::BothMeasures.into());
            }
        };
        let shedder = UtilizationShedder {
            source,
            classify: settings
                .classify
                .take()
                .unwrap_or_else(|| Arc::new(|_: &Parts| Priority::Normal)),
            control: Mutex::new(ShedControl::new(settings.law, Instant::now())?),
            in_flight: InFlight::default(),
            retry_after,
            random: settings
                .random
                .take()
                .unwrap_or_else(|| Arc::new(fastrand::f64)),
            shed_log: Throttled::new(Duration::from_secs(1)),
        };
        // It asks no store, so it never fails: no refusal for that.
        self.finish(shedder, NoKeys, None, Shedding::default_response)
    }
}

impl Configure for UtilizationShedder {
    type Settings = Settings;
}

impl Hinted for UtilizationShedder {
    const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);
}
