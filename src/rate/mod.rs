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
//! handler; a refused one is answered with a [`Rejection`] (429, 400 or 503).

mod builder;
mod limiter;
mod plan;
mod rejection;
mod shadow;

pub use self::builder::RateLimitLayerBuilder;
pub use self::limiter::RateLimiter;
pub use self::plan::Plan;
pub use self::rejection::Rejection;
pub use self::shadow::ShadowSwitch;
use crate::admission::{Admission, AdmissionLayer};

/// A tower layer that rate limits requests: one policy, one key, one store.
///
/// Layers are cheap to clone and every service made from one shares the same limit (the state
/// lives in the store, not in the service), so they work behind axum's cloning router. Put one
/// on a router, on a single route, or in a `ServiceBuilder`; see the [module](self) for an
/// example and [`RateLimitLayerBuilder`] for the settings.
pub type RateLimitLayer = AdmissionLayer<RateLimiter>;

/// The service a [`RateLimitLayer`] makes: it rate limits the requests to `S`.
pub type RateLimit<S> = Admission<S, RateLimiter>;
