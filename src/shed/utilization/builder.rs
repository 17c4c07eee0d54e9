//! [`UtilizationShedLayerBuilder`]: how utilisation is measured, the control law, and who is shed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::request::Parts;
use tokio::time::Instant;

use super::UtilizationShedLayer;
use super::in_flight::InFlight;
use super::shedder::{RandomFn, Source, UtilizationFn, UtilizationShedder};
use crate::admission::{LayerSettings, rejection_setting};
use crate::concurrency::settings::retry_hint_setting;
use crate::error::{ConfigError, ShedConfigError};
use crate::log::Throttled;
use crate::respond::HeaderFamilies;
use crate::shed::priority::{Classifier, Priority};
use crate::shed::{ControlLaw, ShedControl, UtilizationShedRejection};

/// Configures a [`UtilizationShedLayer`]: [its page](UtilizationShedLayer) lists every setting
/// with its default. Required: a [`capacity`](Self::capacity) or a
/// [`utilization`](Self::utilization) function.
#[must_use]
pub struct UtilizationShedLayerBuilder {
    common: LayerSettings<UtilizationShedRejection>,
    retry_after: Duration,
    capacity: Option<usize>,
    utilization: Option<Arc<UtilizationFn>>,
    classify: Option<Classifier>,
    law: ControlLaw,
    random: Option<Arc<RandomFn>>,
}

retry_hint_setting!(
    UtilizationShedLayerBuilder,
    "Default: 5 s: the drop probability changes over tens of seconds, so a client that retries \
     at once mostly adds load."
);
rejection_setting!(UtilizationShedLayerBuilder, UtilizationShedRejection);

impl UtilizationShedLayer {
    /// A builder for a layer.
    pub fn builder() -> UtilizationShedLayerBuilder {
        UtilizationShedLayerBuilder {
            // It writes no rate-limit headers: a shed 503 carries only `Retry-After`.
            common: LayerSettings::new(HeaderFamilies::NONE),
            retry_after: Duration::from_secs(5),
            capacity: None,
            utilization: None,
            classify: None,
            law: ControlLaw::default(),
            random: None,
        }
    }
}

impl UtilizationShedLayerBuilder {
    /// Measures utilisation as the requests in flight through the layer divided by `capacity`:
    /// how many this instance serves at once before it slows down (its worker count, or the
    /// concurrency at which latency starts to climb in a load test). At least 1.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Measures utilisation with your function instead, read at every request: 0 is idle, 1 is
    /// saturated (e.g. busy workers over all workers, or CPU load). Keep it cheap (read a value a
    /// background task refreshes). Values above 1 count as 1, below 0 as 0; NaN leaves the
    /// shedding amount where it is.
    pub fn utilization(mut self, utilization: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.utilization = Some(Arc::new(utilization));
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
        self.classify = Some(Arc::new(classify));
        self
    }

    /// The control law's constants (default: Stripe's, [`ControlLaw::STRIPE`]).
    pub fn control_law(mut self, law: ControlLaw) -> Self {
        self.law = law;
        self
    }

    /// The source of uniform random numbers in `[0, 1)` that pick which requests to shed (default:
    /// a fast thread-local generator). A request is shed when its number is below its priority's
    /// drop probability; give a fixed sequence to make tests deterministic.
    pub fn random_source(mut self, random: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.random = Some(Arc::new(random));
        self
    }

    /// Validates the configuration and builds the layer. The control starts rested as of now.
    pub fn build(self) -> Result<UtilizationShedLayer, ConfigError> {
        let UtilizationShedLayerBuilder {
            common,
            retry_after,
            capacity,
            utilization,
            classify,
            law,
            random,
        } = self;
        let source = match (capacity, utilization) {
            (Some(0), _) => return Err(ShedConfigError::ZeroCapacity.into()),
            (Some(capacity), None) => Source::Capacity(capacity),
            (None, Some(function)) => Source::Function(function),
            (None, None) => return Err(ShedConfigError::NoUtilization.into()),
            (Some(_), Some(_)) => return Err(ShedConfigError::BothMeasures.into()),
        };
        let shedder = UtilizationShedder {
            source,
            classify: classify.unwrap_or_else(|| Arc::new(|_: &Parts| Priority::Normal)),
            control: Mutex::new(ShedControl::new(law, Instant::now())?),
            in_flight: InFlight::default(),
            retry_after,
            random: random.unwrap_or_else(|| Arc::new(fastrand::f64)),
            shed_log: Throttled::new(Duration::from_secs(1)),
        };
        // It asks no store, so it never fails: no refusal for that.
        common.finish(
            shedder,
            None,
            None,
            UtilizationShedRejection::default_response,
        )
    }
}
