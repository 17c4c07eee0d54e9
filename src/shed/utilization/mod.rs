//! The worker-utilisation load shedder: [`UtilizationShedLayer`] refuses a slowly growing share
//! of low-priority requests once this instance has been overloaded for a while.

mod builder;
mod in_flight;
mod rejection;
mod shedder;

pub use self::builder::UtilizationShedLayerBuilder;
pub use self::in_flight::InFlightGuard;
pub use self::rejection::UtilizationShedRejection;
pub use self::shedder::UtilizationShedder;
use crate::admission::{Admission, AdmissionLayer};

/// A tower layer that sheds low-priority requests when this instance stays overloaded (Stripe's
/// worker utilisation load shedder).
///
/// Utilisation is the number of requests in flight through the layer over a
/// [capacity](UtilizationShedLayerBuilder::capacity), or whatever a
/// [function](UtilizationShedLayerBuilder::utilization) you give returns (CPU, worker pool
/// occupancy). The [`ControlLaw`](super::ControlLaw) turns it into a drop probability per
/// [`Priority`](super::Priority) that rises slowly after a sustained overload and falls slowly
/// after it; shed requests get 503 with `Retry-After` and a problem+json body.
/// [`Priority::Critical`](super::Priority::Critical) requests are never shed.
///
/// Every service made from one layer (and every clone of the layer) shares one count and one
/// control state, so it works behind axum's cloning router. Use one layer per instance, outermost
/// among the limits (see the [guide](crate::shed)).
///
/// ```
/// use axum::{Router, routing::{get, post}};
/// use tower_redis_ratelimit::UtilizationShedLayer;
/// use tower_redis_ratelimit::shed::Priority;
///
/// let shed = UtilizationShedLayer::builder()
///     .capacity(64)
///     .classify(|parts| match parts.uri.path() {
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
///
/// # Settings
///
/// `builder()` returns a [`UtilizationShedLayerBuilder`], whose methods set:
///
/// | setting | default |
/// |---|---|
/// | [`capacity`](UtilizationShedLayerBuilder::capacity): utilisation as requests in flight over this | required, or `utilization` |
/// | [`utilization`](UtilizationShedLayerBuilder::utilization): your own measure of utilisation instead | required, or `capacity` |
/// | [`classify`](UtilizationShedLayerBuilder::classify): each request's priority | [`Priority::Normal`](crate::shed::Priority::Normal) |
/// | [`control_law`](UtilizationShedLayerBuilder::control_law): how fast shedding rises and falls | [`ControlLaw::STRIPE`](crate::shed::ControlLaw::STRIPE) |
/// | [`random_source`](UtilizationShedLayerBuilder::random_source): which requests are shed | a thread-local generator |
/// | [`retry_after`](UtilizationShedLayerBuilder::retry_after): the refusal's `Retry-After` | 5 s |
/// | [`on_rejection`](UtilizationShedLayerBuilder::on_rejection): the refusal's response | problem+json |
pub type UtilizationShedLayer = AdmissionLayer<UtilizationShedder>;

/// The service a [`UtilizationShedLayer`] makes.
pub type UtilizationShed<S> = Admission<S, UtilizationShedder>;
