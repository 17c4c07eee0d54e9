#![doc = include_str!("../docs/overview.md")]
//!
//! # Getting started
//!
#![doc = include_str!("../docs/getting-started.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod admission;
mod algorithm;
pub mod clock;
#[cfg(feature = "concurrency")]
#[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
pub mod concurrency;
#[cfg(feature = "config")]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub mod config;
pub mod decision;
#[cfg(feature = "metrics")]
mod describe;
pub mod error;
#[cfg(feature = "axum")]
mod extract;
pub mod guide;
pub mod key;
mod log;
pub mod policy;
mod quota;
pub mod rate;
pub mod respond;
#[cfg(feature = "shed")]
#[cfg_attr(docsrs, doc(cfg(feature = "shed")))]
pub mod shed;
pub mod store;
mod sync;
mod telemetry;

pub use admission::{FailureMode, MissingKey};
#[cfg(feature = "concurrency")]
#[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
pub use concurrency::ConcurrencyLimitLayer;
/// deadpool-redis, whose `Config` can configure a [`RedisStore`] ([`RedisStore::from_config`]),
/// with its `serde` feature on: use this re-export to be sure of a matching version.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use deadpool_redis;
pub use decision::{Decision, Verdicts};
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use describe::describe_metrics;
pub use error::ConfigError;
pub use policy::{Policy, Rule};
pub use quota::Quota;
pub use rate::RateLimitLayer;
pub use respond::HeaderFamilies;
#[cfg(feature = "shed")]
#[cfg_attr(docsrs, doc(cfg(feature = "shed")))]
pub use shed::{FleetShedLayer, UtilizationShedLayer};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use store::RedisStore;
pub use store::{MemoryStore, Store};

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
