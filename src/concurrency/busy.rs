//! [`Busy`]: why a request found no free slot.

use std::sync::Arc;
use std::time::Duration;

/// A refused request's slot: what its limit is, how full it is, when to retry. Carried by
/// [`ConcurrencyLimitRejection::Busy`](super::ConcurrencyLimitRejection::Busy) and by the fleet shedder's
/// [`FleetShedRejection::Shed`](crate::shed::FleetShedRejection::Shed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    pub(crate) name: Arc<str>,
    pub(crate) limit: u32,
    pub(crate) capacity: u32,
    pub(crate) in_flight: u64,
    pub(crate) retry_after: Duration,
}

impl Busy {
    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many permits this request could have shared: the limit, or for the fleet shedder the
    /// share of capacity its priority may use.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The whole capacity: the limit, or for the fleet shedder the fleet's capacity.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// How many permits were held when the request was refused.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The retry hint sent in `Retry-After`.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}
