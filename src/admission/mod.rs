//! The admission core: what every middleware of this crate shares.
//!
//! A rate limit, a concurrency limit and a load shedder all answer one question for each request:
//! may it pass? Each is a limiter (an implementation of a small sealed trait) over one generic
//! service, [`Admission`], with one response future, [`ResponseFuture`], and one response body,
//! [`ResponseBody`], made by one layer, [`AdmissionLayer`]. Each middleware has its own builder
//! (`RateLimitLayerBuilder`, ...), whose shared settings are filled the same way. What they share
//! lives here, once:
//!
//! - the key: the layer's extractor, and what to do without a key ([`MissingKey`]);
//! - the store call's deadline, and what to do when the store fails ([`FailureMode`]);
//! - when to refuse and which headers each response carries (what they say, the problem+json
//!   bodies and the user's `on_rejection` hook, is [`respond`](crate::respond)'s);
//! - the warnings of a store outage, at most one per second per layer;
//! - the body that holds what a request was admitted with (a concurrency permit, a place in the
//!   in-flight count) until the response is finished.
//!
//! Each middleware names these types by its own aliases ([`RateLimitLayer`](crate::RateLimitLayer),
//! [`RateLimit`](crate::rate::RateLimit), [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer),
//! ...), which is how you will usually meet them.

mod admit;
mod body;
mod core;
mod deadline;
mod failure;
mod future;
mod keys;
mod layer;
mod service;
mod settings;

pub(crate) use self::admit::Sealed;
pub use self::admit::{Admit, Verdict};
pub use self::body::ResponseBody;
pub use self::failure::{FailureMode, MissingKey};
pub use self::future::ResponseFuture;
pub use self::layer::AdmissionLayer;
pub use self::service::Admission;
pub(crate) use self::settings::{LayerSettings, keyed_settings, rejection_setting, store_settings};
