//! Load shedders: refuse some traffic with 503 so that the rest is served.
//!
//! - [`UtilizationShedLayer`]: per instance (seed 004's worker utilisation shedder): once an
//!   instance has been overloaded for a while, refuse a slowly growing share of requests, lowest
//!   [`Priority`] first, never critical ones.
//! - [`FleetShedLayer`]: fleet usage (seed 004): one global concurrency slot for the whole fleet;
//!   each [`Priority`] may fill it only up to its share, so capacity stays reserved for critical
//!   traffic.
//!
#![doc = include_str!("../../docs/load-shedding.md")]

mod control;
mod fleet;
mod priority;
mod shedding;
mod utilization;

pub use control::{ControlLaw, ShedControl};
pub use fleet::{FleetShedLayer, FleetShedLayerBuilder};
pub use priority::{Classify, ParsePriorityError, Priority};
pub use shedding::Shedding;
pub use utilization::{
    InFlightBody, InFlightGuard, UtilizationShed, UtilizationShedFuture, UtilizationShedLayer,
    UtilizationShedLayerBuilder,
};

pub(crate) use fleet::FleetShares;
