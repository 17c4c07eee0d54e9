//! Load shedders: refuse some traffic with 503 so that the rest is served (after Stripe's load
//! shedders).
//!
//! - [`UtilizationShedLayer`]: per instance (Stripe's worker
//!   utilisation load shedder): once an instance has been overloaded for a while, refuse a slowly
//!   growing share of requests, lowest [`Priority`] first, never critical ones.
//! - [`FleetShedLayer`]: fleet usage (Stripe's fleet usage load shedder):
//!   one global concurrency slot for the whole fleet; each [`Priority`] may fill it only up to its
//!   share, so capacity stays reserved for critical traffic.
//!
#![doc = include_str!("../../docs/load-shedding.md")]

mod control;
mod fleet;
mod priority;
#[cfg(test)]
mod testing;
mod utilization;

pub use self::control::{ControlLaw, ShedControl};
pub use self::fleet::{
    FleetShares, FleetShed, FleetShedLayer, FleetShedLayerBuilder, FleetShedRejection,
};
pub use self::priority::{ParsePriorityError, Priority};
pub use self::utilization::{
    InFlightGuard, UtilizationShed, UtilizationShedLayer, UtilizationShedLayerBuilder,
    UtilizationShedRejection, UtilizationShedder,
};
