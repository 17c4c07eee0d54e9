//! [`UtilizationShedRejection`]: what a load shedder knew when it refused a request.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};

use crate::respond;
use crate::shed::Priority;

/// Why a [`UtilizationShedLayer`](crate::UtilizationShedLayer) refused a request: what its
/// `on_rejection` hook receives, and what its default 503 says.
#[derive(Clone, Debug, PartialEq)]
pub struct UtilizationShedRejection {
    priority: Priority,
    drop_probability: f64,
    utilization: f64,
    retry_after: Duration,
}

impl UtilizationShedRejection {
    pub(crate) fn new(
        priority: Priority,
        drop_probability: f64,
        utilization: f64,
        retry_after: Duration,
    ) -> Self {
        Self {
            priority,
            drop_probability,
            utilization,
            retry_after,
        }
    }

    /// The refused request's priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The share of requests of this priority being refused, from 0 to 1.
    pub fn drop_probability(&self) -> f64 {
        self.drop_probability
    }

    /// The utilisation measured for this request (1 means at capacity; it may be higher).
    pub fn utilization(&self) -> f64 {
        self.utilization
    }

    /// How long the client is asked to wait before retrying (sent as `Retry-After`).
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The status of the default response: 503.
    pub fn status(&self) -> StatusCode {
        StatusCode::SERVICE_UNAVAILABLE
    }

    /// The default response: a problem+json 503 saying that the service is overloaded, which
    /// share of this priority is refused, and when to retry.
    pub fn default_response(&self) -> Response<Bytes> {
        respond::overloaded(self.priority, self.drop_probability, self.retry_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shed::testing::shed_detail;

    #[test]
    fn a_shed_request_is_told_its_priority_and_when_to_retry() {
        let shedding =
            UtilizationShedRejection::new(Priority::Low, 0.25, 1.0, Duration::from_millis(4_100));
        let response = shedding.default_response();
        assert_eq!(
            shed_detail(&response, Priority::Low, 5),
            "The service is overloaded and refuses 25% of low priority requests to recover. \
             Retry after 5 seconds."
        );
    }
}
