//! [`Busy`]: why a request found no free slot.

use std::time::Duration;

use crate::shed::Priority;

/// A refused request's slot: what its limit is, how full it is, when to retry. Carried by
/// [`Rejection::TooManyInFlight`](crate::Rejection::TooManyInFlight) and
/// [`Rejection::FleetShed`](crate::Rejection::FleetShed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    pub(crate) name: std::sync::Arc<str>,
    pub(crate) limit: u32,
    pub(crate) capacity: u32,
    pub(crate) in_flight: u64,
    pub(crate) retry_after: Duration,
    pub(crate) priority: Option<Priority>,
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

    /// The request's priority, for the fleet shedder.
    pub fn priority(&self) -> Option<Priority> {
        self.priority
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;
    use crate::Rejection;

    fn busy(priority: Option<Priority>) -> Busy {
        Busy {
            name: "ws".into(),
            limit: 5,
            capacity: 10,
            in_flight: 5,
            retry_after: Duration::from_millis(2_500),
            priority,
        }
    }

    fn detail(rejection: &Rejection<'_>) -> serde_json::Value {
        serde_json::from_slice(rejection.default_response().body()).unwrap()
    }

    #[test]
    fn a_full_slot_is_a_429_and_a_shed_request_a_503_each_saying_why() {
        let limited = busy(None);
        let rejection = Rejection::TooManyInFlight(&limited);
        assert_eq!(rejection.status(), StatusCode::TOO_MANY_REQUESTS);
        let body = detail(&rejection);
        assert_eq!(body["retry_after"], 3);
        assert_eq!(body["limit"], 5);
        assert_eq!(
            body["detail"],
            "Concurrency limit \"ws\" (5 at once) reached: 5 requests are in flight. Retry after 3 seconds."
        );

        let shed = busy(Some(Priority::Low));
        let rejection = Rejection::FleetShed(&shed);
        assert_eq!(rejection.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            detail(&rejection)["detail"],
            "The service is shedding load: low requests may use 5 of 10 slots and 5 are in use. Retry after 3 seconds."
        );
    }
}
