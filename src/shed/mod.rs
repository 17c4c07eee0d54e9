#![doc = include_str!("../../docs/load-shedding.md")]

mod control;
mod priority;
mod shedding;
mod utilization;

pub use control::{ControlLaw, ShedControl};
pub use priority::{Classify, ParsePriorityError, Priority};
pub use shedding::Shedding;
pub use utilization::{
    InFlightBody, UtilizationShed, UtilizationShedFuture, UtilizationShedLayer,
    UtilizationShedLayerBuilder,
};
