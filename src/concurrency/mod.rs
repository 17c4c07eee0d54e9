//! Distributed concurrency limits: at most N requests (or WebSocket connections) in flight per
//! key, across every server that shares the store.
//!
//! A request takes a *permit* from its *slot* (a limit name and a client key) before it runs and
//! gives it back when its response body is finished or dropped, when it is cancelled, when the
//! handler panics or fails. Permits *expire*: the store forgets one that is not renewed within
//! the TTL, and one background task per store (the heartbeat) renews every live permit of the
//! process, so a crashed or partitioned server's slots come back within a TTL while long
//! requests keep theirs. See `docs/concurrency.md` for the protocol.
//!
//! - [`ConcurrencyLimitLayer`]: the tower layer, configured by [`ConcurrencyLimitLayerBuilder`].
//! - [`ConcurrencyPermit`]: a held slot, in the request extensions; move a clone into a WebSocket
//!   task to hold the slot for the life of the connection.
//! - [`ConcurrencyLimitRejection`]: why a request was refused, for the `on_rejection` hook.
//! - What crosses the store boundary (slots, permit ids, permits) is in
//!   [`store::permits`](crate::store::permits).
//! - The fleet usage load shedder ([`FleetShedLayer`](crate::FleetShedLayer)) is the same limiter
//!   given the fleet's shares by priority.
//!
#![doc = include_str!("../../docs/concurrency.md")]

mod builder;
mod busy;
mod limiter;
mod permit;
mod rejection;
pub(crate) mod settings;
mod slot_limit;

pub use self::builder::ConcurrencyLimitLayerBuilder;
pub use self::busy::Busy;
pub use self::limiter::ConcurrencyLimiter;
pub use self::permit::ConcurrencyPermit;
pub use self::rejection::ConcurrencyLimitRejection;
pub use self::slot_limit::{PerKey, SlotLimit};
use crate::admission::{Admission, AdmissionLayer, ResponseBody};

/// A tower layer that limits how many requests are in flight at once per key, across every
/// server sharing the store.
///
/// A request over the limit is answered `429 Too Many Requests` with `Retry-After` (1 s by
/// default) and the headers `RateLimit-Policy: "name";q=N;qu="concurrent-requests"` and
/// `RateLimit: "name";r=<free slots>`. An admitted request holds its slot until its response body
/// is finished or dropped, or until it is cancelled, panics or fails; a handler may hold it longer
/// by keeping the [`ConcurrencyPermit`] from the request extensions (WebSockets).
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use tower_redis_ratelimit::{key::HeaderKey, ConcurrencyLimitLayer};
///
/// let limit = ConcurrencyLimitLayer::builder()
///     .name("reports")
///     .max_in_flight(2)
///     .key(HeaderKey::new("x-api-key"))
///     .permit_ttl(Duration::from_secs(30))
///     .build()?;
/// let app: Router = Router::new().route("/report", get(|| async { "done" }).layer(limit));
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
///
/// # Settings
///
/// `builder()` returns a [`ConcurrencyLimitLayerBuilder`], whose methods set:
///
/// | setting | default |
/// |---|---|
/// | [`max_in_flight`](ConcurrencyLimitLayerBuilder::max_in_flight): requests of one key in flight at once | required |
/// | [`key`](ConcurrencyLimitLayerBuilder::key): who is limited | required |
/// | [`name`](ConcurrencyLimitLayerBuilder::name): the slot's name, in headers and storage keys | required |
/// | [`store`](ConcurrencyLimitLayerBuilder::store): where permits are held | a new [`MemoryStore`](crate::MemoryStore) |
/// | [`permit_ttl`](ConcurrencyLimitLayerBuilder::permit_ttl): how long a permit survives without renewal | 30 s |
/// | [`renew_every`](ConcurrencyLimitLayerBuilder::renew_every): how often the heartbeat renews permits | a third of the TTL |
/// | [`on_missing_key`](ConcurrencyLimitLayerBuilder::on_missing_key) | 400 |
/// | [`exemptions`](ConcurrencyLimitLayerBuilder::exemptions): allow and deny lists | none |
/// | [`failure_mode`](ConcurrencyLimitLayerBuilder::failure_mode): when the store fails | fail open |
/// | [`deadline`](ConcurrencyLimitLayerBuilder::deadline): how long to wait for the store | 100 ms |
/// | [`headers`](ConcurrencyLimitLayerBuilder::headers): which header families | [`HeaderFamilies::DEFAULT`](crate::respond::HeaderFamilies::DEFAULT) |
/// | [`retry_after`](ConcurrencyLimitLayerBuilder::retry_after): the refusal's `Retry-After` | 1 s |
/// | [`on_rejection`](ConcurrencyLimitLayerBuilder::on_rejection): the refusal's response | problem+json |
pub type ConcurrencyLimitLayer = AdmissionLayer<ConcurrencyLimiter<PerKey>>;

/// The service a [`ConcurrencyLimitLayer`] makes.
pub type ConcurrencyLimit<S> = Admission<S, ConcurrencyLimiter<PerKey>>;

/// The body of a concurrency-limited response: it holds the request's [`ConcurrencyPermit`] until
/// it is finished or dropped, so a streamed response keeps its slot while it streams.
pub type ConcurrencyBody<B> = ResponseBody<B, ConcurrencyPermit>;
