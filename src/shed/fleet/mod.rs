//! The fleet usage load shedder: one global concurrency slot for the whole fleet, each priority
//! allowed to fill it only up to its share (Stripe's fleet usage load shedder).
//!
//! Every request of every server takes a permit from one slot whose capacity is what the fleet
//! can serve at once. A request of priority `p` is admitted only while fewer than
//! `capacity × share(p)` permits are held, checked and taken in one atomic store call (the share
//! is an argument of the same script the concurrency limit uses). With the default shares
//! (low 50 %, normal 80 %, high 90 %, critical 100 %), low-priority traffic is shed first once
//! the fleet is half busy, normal traffic at 80 %, high at 90 %, and the last 10 % stays reserved
//! for critical requests. Shed requests get `503 Service Unavailable` with `Retry-After`.
//!
//! The capacity is a hard bound, for critical requests too: once every permit is held, a critical
//! request is refused as well, since admitting it would load the fleet past what it can serve,
//! which is what the shedder exists to prevent. Critical requests are the last refused, not never
//! refused (the utilisation shedder, which has no hard bound, never refuses them).

mod builder;
mod rejection;
mod shares;

pub use self::builder::FleetShedLayerBuilder;
pub use self::rejection::FleetShedRejection;
pub use self::shares::FleetShares;
use crate::admission::{Admission, AdmissionLayer};
use crate::concurrency::ConcurrencyLimiter;

/// A tower layer that sheds lower-priority requests once the whole fleet is busy.
///
/// A request of each priority is admitted while fewer permits than its share of the capacity are
/// held; [`Priority::Critical`](super::Priority::Critical) (share 100 % by default) is refused
/// only when the whole capacity is in use. The priority is recorded in the request extensions,
/// where inner layers and the handler find it (`Extension<Priority>`).
///
/// ```
/// use axum::{Router, routing::get};
/// use tower_redis_ratelimit::FleetShedLayer;
/// use tower_redis_ratelimit::shed::Priority;
///
/// let shed = FleetShedLayer::builder()
///     .capacity(1_000)
///     .share(Priority::Low, 40)
///     .classify(|parts| {
///         if parts.uri.path().starts_with("/charges") {
///             Priority::Critical
///         } else if parts.uri.path().starts_with("/analytics") {
///             Priority::Low
///         } else {
///             Priority::Normal
///         }
///     })
///     .build()?;
/// let app: Router = Router::new().route("/charges", get(|| async { "ok" })).layer(shed);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
///
/// # Settings
///
/// `builder()` returns a [`FleetShedLayerBuilder`], whose methods set:
///
/// | setting | default |
/// |---|---|
/// | [`capacity`](FleetShedLayerBuilder::capacity): requests the whole fleet serves at once | required |
/// | [`share`](FleetShedLayerBuilder::share): each priority's percentage of it | low 50, normal 80, high 90, critical 100 |
/// | [`classify`](FleetShedLayerBuilder::classify): each request's priority | [`Priority::Normal`](crate::shed::Priority::Normal) |
/// | [`name`](FleetShedLayerBuilder::name): the slot's name, in headers and storage keys | `fleet` |
/// | [`store`](FleetShedLayerBuilder::store): where permits are held | a new [`MemoryStore`](crate::MemoryStore) |
/// | [`permit_ttl`](FleetShedLayerBuilder::permit_ttl): how long a permit survives without renewal | 30 s |
/// | [`renew_every`](FleetShedLayerBuilder::renew_every): how often the heartbeat renews permits | a third of the TTL |
/// | [`failure_mode`](FleetShedLayerBuilder::failure_mode): when the store fails | fail open |
/// | [`deadline`](FleetShedLayerBuilder::deadline): how long to wait for the store | 100 ms |
/// | [`headers`](FleetShedLayerBuilder::headers): which header families | none |
/// | [`retry_after`](FleetShedLayerBuilder::retry_after): the refusal's `Retry-After` | 1 s |
/// | [`on_rejection`](FleetShedLayerBuilder::on_rejection): the refusal's response | problem+json |
pub type FleetShedLayer = AdmissionLayer<ConcurrencyLimiter<FleetShares>>;

/// The service a [`FleetShedLayer`] makes.
pub type FleetShed<S> = Admission<S, ConcurrencyLimiter<FleetShares>>;
