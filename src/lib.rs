#![doc = include_str!("../docs/overview.md")]
//!
//! # Getting started
//!
#![doc = include_str!("../docs/getting-started.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod algorithm;
mod body;
pub mod clock;
pub mod concurrency;
mod deadline;
mod decision;
mod error;
mod future;
pub mod guide;
mod headers;
mod held_body;
pub mod key;
mod layer;
mod log;
mod policy;
mod response;
mod service;
pub mod shed;
pub mod store;

pub use body::ResponseBody;
pub use concurrency::{ConcurrencyLimitLayer, ConcurrencyPermit};
pub use decision::{Decision, Outcome, RuleVerdict};
pub use error::{ConfigError, SharedError, StoreError};
pub use future::ResponseFuture;
pub use headers::Headers;
pub use held_body::HeldBody;
pub use layer::{FailureMode, MissingKey, RateLimitLayer, RateLimitLayerBuilder};
pub use policy::{Algorithm, MAX_PERIOD, MAX_RULES, MIN_PERIOD, Policy, Quota, Rule};
pub use response::Rejection;
pub use service::RateLimit;
pub use shed::{FleetShedLayer, Priority, UtilizationShedLayer};
pub use store::{MemoryStore, RedisStore, Store, StoreFuture};

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
