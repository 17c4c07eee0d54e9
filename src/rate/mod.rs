//! Rate limits: [`RateLimitLayer`] admits each key's requests up to the quotas of a policy, counted
//! in a store shared by every replica.
//!
//! ```
//! use std::time::Duration;
//! use axum::{Router, routing::get};
//! use tower_redis_ratelimit::{key::ClientIp, Quota, RateLimitLayer, Rule};
//!
//! let limit = RateLimitLayer::builder()
//!     .rule(Rule::fixed_window("hello", Quota::new(5, Duration::from_secs(10))))
//!     .key(ClientIp::peer())
//!     .build()?;
//! let app: Router = Router::new().route("/hello", get(|| async { "hello" }).layer(limit));
//! # Ok::<(), tower_redis_ratelimit::ConfigError>(())
//! ```
//!
//! An admitted request carries its [`Decision`](crate::Decision) in its extensions, for the
//! handler; a refused one is answered with a [`RateLimitRejection`] (429, 400 or 503).

mod builder;
mod limiter;
mod plan;
mod rejection;
mod reset;
mod shadow;
mod waited;

pub use self::builder::RateLimitLayerBuilder;
pub use self::limiter::RateLimiter;
pub use self::plan::Plan;
pub use self::rejection::RateLimitRejection;

pub use self::shadow::ShadowSwitch;
pub use self::waited::Waited;
use crate::admission::{Admission, AdmissionLayer};

/// A tower layer that rate limits requests: one policy, one key, one store.
///
/// Layers are cheap to clone and every service made from one shares the same limit (the state
/// lives in the store, not in the service), so they work behind axum's cloning router. Put one
/// on a router, on a single route, or in a `ServiceBuilder`; see the [module](self) for an
/// example.
///
/// # Settings
///
/// [`RateLimitLayer::builder`] returns a [`RateLimitLayerBuilder`], whose methods set:
///
/// | setting | default |
/// |---|---|
/// | [`rule`](RateLimitLayerBuilder::rule), [`policy`](RateLimitLayerBuilder::policy): what is counted | required |
/// | [`key`](RateLimitLayerBuilder::key): who is limited | required |
/// | [`store`](RateLimitLayerBuilder::store): where counts are kept | a new [`MemoryStore`](crate::MemoryStore) |
/// | [`cost`](RateLimitLayerBuilder::cost): what a request costs | 1 |
/// | [`plan`](RateLimitLayerBuilder::plan), [`choose_plan`](RateLimitLayerBuilder::choose_plan): other policies for some requests ([rollout guide](crate::guide::rollout)) | none; the [`Plan`] in the extensions |
/// | [`shadow`](RateLimitLayerBuilder::shadow), [`shadow_switch`](RateLimitLayerBuilder::shadow_switch): decide and count without refusing, turned at run time by the layer's [`ShadowSwitch`] | off: enforcing, on a switch of its own |
/// | [`shadow_headers`](RateLimitLayerBuilder::shadow_headers): tell a shadow decision as a `Shadow-` state | off: nothing |
/// | [`partition_key`](RateLimitLayerBuilder::partition_key): `pk` in `RateLimit` | off |
/// | [`on_missing_key`](RateLimitLayerBuilder::on_missing_key) | 400 |
/// | [`exemptions`](RateLimitLayerBuilder::exemptions): allow and deny lists of keys and client networks | none |
/// | [`failure_mode`](RateLimitLayerBuilder::failure_mode): when the store fails | fail open |
/// | [`deadline`](RateLimitLayerBuilder::deadline): how long to wait for the store | 100 ms |
/// | [`headers`](RateLimitLayerBuilder::headers): which header families | [`HeaderFamilies::DEFAULT`](crate::respond::HeaderFamilies::DEFAULT) |
/// | [`on_rejection`](RateLimitLayerBuilder::on_rejection): the refusal's response | problem+json |
pub type RateLimitLayer = AdmissionLayer<RateLimiter>;

/// The service a [`RateLimitLayer`] makes: it rate limits the requests to `S`.
pub type RateLimit<S> = Admission<S, RateLimiter>;
