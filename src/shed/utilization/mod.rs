//! The worker-utilisation load shedder: [`UtilizationShedLayer`] makes [`UtilizationShed`]
//! services, which answer with [`UtilizationShedFuture`]s whose bodies ([`InFlightBody`]) keep
//! their request counted in flight until it has been sent.

mod in_flight;
mod layer;
mod service;

pub use in_flight::{InFlightBody, InFlightGuard};
pub use layer::{UtilizationShedLayer, UtilizationShedLayerBuilder};
pub use service::{UtilizationShed, UtilizationShedFuture};
