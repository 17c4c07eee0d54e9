//! [`UtilizationShedLayer`] and its builder: one instance's utilisation, the control law, and the
//! decision for each request.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http::request::Parts;
use tokio::time::Instant;
use tower_layer::Layer;

use super::in_flight::{InFlight, InFlightGuard};
use super::service::UtilizationShed;
use crate::error::ConfigError;
use crate::headers::retry_after;
use crate::log::Throttled;
use crate::response::{Rejection, Responder};
use crate::shed::priority::priority_of;
use crate::shed::{Classify, ControlLaw, Priority, ShedControl, Shedding};

type UtilizationFn = dyn Fn() -> f64 + Send + Sync;
type RandomFn = dyn Fn() -> f64 + Send + Sync;

/// The default `Retry-After` of a shed request.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// A tower [`Layer`] that sheds low-priority requests when this instance stays overloaded
/// (seed 004's worker-utilisation load shedder).
///
/// Utilisation is the number of requests in flight through the layer over a
/// [capacity](UtilizationShedLayerBuilder::capacity), or whatever a
/// [function](UtilizationShedLayerBuilder::utilization) you give returns (CPU, worker pool
/// occupancy). The [`ControlLaw`] turns it into a drop probability per [`Priority`] that rises
/// slowly after a sustained overload and falls slowly after it; shed requests get 503 with
/// `Retry-After` and a problem+json body. [`Priority::Critical`] requests are never shed.
///
/// Every service made from one layer (and every clone of the layer) shares one count and one
/// control state, so it works behind axum's cloning router. Use one layer per instance, outermost
/// among the limits (see the [guide](crate::shed)).
///
/// ```
/// use axum::{Router, routing::{get, post}};
/// use http::request::Parts;
/// use tower_redis_ratelimit::shed::{Priority, UtilizationShedLayer};
///
/// let shed = UtilizationShedLayer::builder()
///     .capacity(64)
///     .classify(|parts: &Parts| match parts.uri.path() {
///         "/v1/charges" => Priority::Critical,
///         "/v1/reports" => Priority::Low,
///         _ => Priority::Normal,
///     })
///     .build()?;
/// let app: Router = Router::new()
///     .route("/v1/charges", post(|| async { "charged" }))
///     .route("/v1/reports", get(|| async { "report" }))
///     .layer(shed);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct UtilizationShedLayer {
    shared: Arc<Shared>,
}

impl UtilizationShedLayer {
    /// A builder for a layer.
    pub fn builder() -> UtilizationShedLayerBuilder {
        UtilizationShedLayerBuilder {
            capacity: None,
            utilization: None,
            classify: None,
            law: ControlLaw::default(),
            retry_after: DEFAULT_RETRY_AFTER,
            random: None,
            on_rejection: Responder::default(),
        }
    }

    /// How many requests are in flight through this layer: admitted and not yet answered in full
    /// (the response body not sent or dropped yet).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.count()
    }

    /// The shedding amount as of the last request: negative while healthy, 0 where shedding
    /// starts, 1 when every sheddable request is refused. For metrics and alerts.
    pub fn shedding_amount(&self) -> f64 {
        self.shared.control().amount()
    }

    /// The probability that a request of `priority` is shed, as of the last request.
    pub fn drop_probability(&self, priority: Priority) -> f64 {
        self.shared.control().drop_probability(priority)
    }
}

impl<S> Layer<S> for UtilizationShedLayer {
    type Service = UtilizationShed<S>;

    fn layer(&self, inner: S) -> UtilizationShed<S> {
        UtilizationShed::from_shared(inner, self.shared.clone())
    }
}

impl fmt::Debug for UtilizationShedLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UtilizationShedLayer")
            .field("shared", &self.shared)
            .finish()
    }
}

/// Configures a [`UtilizationShedLayer`]. Required: a [`capacity`](Self::capacity) or a
/// [`utilization`](Self::utilization) function; everything else has a default.
#[must_use]
pub struct UtilizationShedLayerBuilder {
    capacity: Option<usize>,
    utilization: Option<Arc<UtilizationFn>>,
    classify: Option<Arc<dyn Classify>>,
    law: ControlLaw,
    retry_after: Duration,
    random: Option<Arc<RandomFn>>,
    on_rejection: Responder,
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

    /// Decides each request's [`Priority`] (default: every request is [`Priority::Normal`]). A
    /// priority that an earlier layer put into the request extensions is kept; the one decided
    /// here is put there for later layers and the handler.
    pub fn classify(mut self, classify: impl Classify) -> Self {
        self.classify = Some(Arc::new(classify));
        self
    }

    /// The control law's constants (default: the seed's, [`ControlLaw::SEED`]).
    pub fn control_law(mut self, law: ControlLaw) -> Self {
        self.law = law;
        self
    }

    /// The `Retry-After` of shed requests (default 5 s; sent in whole seconds, rounded up, at
    /// least 1). The drop probability changes over tens of seconds, so a client that retries at
    /// once mostly adds load.
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// The source of uniform random numbers in `[0, 1)` that pick which requests to shed (default:
    /// a fast thread-local generator). A request is shed when its number is below its priority's
    /// drop probability; give a fixed sequence to make tests deterministic.
    pub fn random_source(mut self, random: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.random = Some(Arc::new(random));
        self
    }

    /// Replaces the default problem+json 503 with your own response. The layer still adds
    /// `Retry-After` when your response has none.
    pub fn on_rejection<F, B>(mut self, respond: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<B> + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        self.on_rejection = Responder::custom(respond);
        self
    }

    /// Validates the configuration and builds the layer. The control starts rested as of now.
    pub fn build(self) -> Result<UtilizationShedLayer, ConfigError> {
        let source = match (self.capacity, self.utilization) {
            (Some(0), _) => {
                return Err(ConfigError::Shed(
                    "a capacity of 0: the capacity is how many requests in flight make the instance fully utilised, at least 1".into(),
                ));
            }
            (Some(capacity), None) => Source::Capacity(capacity),
            (None, Some(function)) => Source::Function(function),
            (None, None) => {
                return Err(ConfigError::Shed(
                    "no measure of utilisation: call `.capacity(n)` to count requests in flight, or `.utilization(f)` to measure it yourself".into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError::Shed(
                    "both `.capacity(n)` and `.utilization(f)` are set: choose one measure of utilisation".into(),
                ));
            }
        };
        let shared = Shared {
            source,
            classify: self.classify.unwrap_or_else(|| Arc::new(Priority::Normal)),
            control: Mutex::new(ShedControl::new(self.law, Instant::now())?),
            in_flight: InFlight::default(),
            retry_after: self.retry_after,
            random: self.random.unwrap_or_else(|| Arc::new(fastrand::f64)),
            on_rejection: self.on_rejection,
            shed_log: Throttled::new(Duration::from_secs(1)),
        };
        Ok(UtilizationShedLayer {
            shared: Arc::new(shared),
        })
    }
}

enum Source {
    Capacity(usize),
    Function(Arc<UtilizationFn>),
}

/// What becomes of one request.
pub(crate) enum Admission {
    /// Call the service; the request counts as in flight until the guard drops.
    Admitted(InFlightGuard),
    /// Answer with this 503 instead.
    Shed(Response<Bytes>),
}

/// The state shared by a layer and every service it makes.
pub(crate) struct Shared {
    source: Source,
    classify: Arc<dyn Classify>,
    control: Mutex<ShedControl>,
    in_flight: InFlight,
    retry_after: Duration,
    random: Arc<RandomFn>,
    on_rejection: Responder,
    shed_log: Throttled,
}

impl Shared {
    /// Admits the request, counted in flight until the guard drops, or answers it with a 503.
    pub(crate) fn admit(&self, parts: &mut Parts) -> Admission {
        let priority = priority_of(parts, &*self.classify);
        let utilization = match &self.source {
            // Measured before this request counts: at capacity means `capacity` others in flight.
            Source::Capacity(capacity) => self.in_flight.count() as f64 / *capacity as f64,
            Source::Function(function) => function(),
        };
        let drop_probability = {
            // Every request moves the control, critical ones too: the law integrates utilisation
            // over time, whoever happens to sample it.
            let mut control = self.control();
            control.update(Instant::now(), utilization);
            control.drop_probability(priority)
        };
        // The seed draws only when there is a chance to drop: no random number on the common path.
        if drop_probability > 0.0 && (self.random)() < drop_probability {
            return Admission::Shed(self.refuse(Shedding::new(
                priority,
                drop_probability,
                utilization,
                self.retry_after,
            )));
        }
        Admission::Admitted(self.in_flight.enter())
    }

    fn refuse(&self, shedding: Shedding) -> Response<Bytes> {
        self.shed_log.warn(|suppressed| {
            tracing::warn!(
                priority = %shedding.priority(),
                drop_probability = shedding.drop_probability(),
                utilization = shedding.utilization(),
                suppressed,
                "request shed: the instance has been overloaded for a while"
            );
        });
        let mut response = self.on_rejection.respond(&Rejection::Shed(&shedding));
        retry_after(response.headers_mut(), self.retry_after);
        response
    }

    /// The control state. A panic cannot happen while it is held (only arithmetic runs under the
    /// lock), so a poisoned lock still holds a consistent state.
    fn control(&self) -> MutexGuard<'_, ShedControl> {
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Capacity(capacity) => format!("capacity {capacity}"),
            Source::Function(_) => "a utilization function".to_owned(),
        };
        f.debug_struct("Shared")
            .field("utilization", &source)
            .field("in_flight", &self.in_flight.count())
            .field("control", &*self.control())
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_says_how_to_measure_utilisation() {
        let message =
            |builder: UtilizationShedLayerBuilder| builder.build().unwrap_err().to_string();
        assert!(message(UtilizationShedLayer::builder()).contains("call `.capacity(n)`"));
        assert!(message(UtilizationShedLayer::builder().capacity(0)).contains("capacity of 0"));
        assert!(
            message(
                UtilizationShedLayer::builder()
                    .capacity(4)
                    .utilization(|| 0.5)
            )
            .contains("choose one")
        );
        let bad_law = ControlLaw::default().dead_zone(0.9, 0.8);
        assert!(
            message(
                UtilizationShedLayer::builder()
                    .capacity(4)
                    .control_law(bad_law)
            )
            .contains("dead zone")
        );
        assert!(
            UtilizationShedLayer::builder()
                .utilization(|| 0.5)
                .build()
                .is_ok()
        );
    }
}
