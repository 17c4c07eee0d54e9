//! [`FleetShedRejection`]: why a [`FleetShedLayer`](crate::FleetShedLayer) refused a request.

use bytes::Bytes;
use http::{Response, StatusCode};

use crate::concurrency::Busy;
use crate::respond;
use crate::shed::Priority;
use crate::store::StoreError;

/// Why a [`FleetShedLayer`](crate::FleetShedLayer) answered a request itself: what its
/// `on_rejection` hook receives. Both default responses are 503s with problem+json bodies.
#[derive(Debug)]
#[non_exhaustive]
pub enum FleetShedRejection {
    /// The fleet is too busy for requests of this priority.
    Shed {
        /// The fleet's slot: its capacity, this priority's share of it, how many are in use.
        busy: Busy,
        /// The refused request's priority.
        priority: Priority,
    },
    /// The store failed and the layer fails closed.
    Unavailable(StoreError),
}

impl FleetShedRejection {
    /// The status of the default response: 503.
    pub fn status(&self) -> StatusCode {
        StatusCode::SERVICE_UNAVAILABLE
    }

    /// The default response: a problem+json body saying what happened.
    pub fn default_response(&self) -> Response<Bytes> {
        match self {
            FleetShedRejection::Shed { busy, priority } => respond::fleet_shed(
                *priority,
                busy.name(),
                busy.limit(),
                busy.capacity(),
                busy.in_flight(),
                busy.retry_after(),
            ),
            FleetShedRejection::Unavailable(_) => respond::unavailable(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::shed::testing::shed_detail;

    #[test]
    fn a_shed_request_is_a_503_that_names_its_priority_and_share() {
        let busy = Busy {
            name: "fleet".into(),
            limit: 5,
            capacity: 10,
            in_flight: 5,
            retry_after: Duration::from_millis(2_500),
        };
        let rejection = FleetShedRejection::Shed {
            busy,
            priority: Priority::Low,
        };
        let response = rejection.default_response();
        assert_eq!(
            shed_detail(&response, Priority::Low, 3),
            "The service is shedding load: low requests may use 5 of 10 slots and 5 are in use. \
             Retry after 3 seconds."
        );
    }
}
