//! Load shedders: refuse some traffic with 503 so that the rest is served.
//!
//! - [`FleetShedLayer`]: fleet usage (seed 004): one global concurrency slot for the whole fleet;
//!   each [`Priority`] may fill it only up to its share, so capacity stays reserved for critical
//!   traffic.
//!
#![doc = include_str!("../../docs/load-shedding-fleet.md")]

mod fleet;

pub use fleet::{FleetShedLayer, FleetShedLayerBuilder, Priority};

pub(crate) use fleet::FleetShares;
