//! [`Shedding`]: what a load shedder knew when it refused a request.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::Priority;
use crate::headers::retry_seconds;
use crate::response::{Problem, retry_sentence};

/// Why a [`UtilizationShedLayer`](crate::UtilizationShedLayer) refused a request: what its
/// `on_rejection` hook receives, and what its default 503 says.
#[derive(Clone, Debug, PartialEq)]
pub struct Shedding {
    priority: Priority,
    drop_probability: f64,
    utilization: f64,
    retry_after: Duration,
}

impl Shedding {
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
        let seconds = retry_seconds(self.retry_after);
        let detail = format!(
            "The service is overloaded and refuses {:.0}% of {} priority requests to recover. {}",
            self.drop_probability * 100.0,
            self.priority,
            retry_sentence(seconds)
        );
        let mut problem = Problem::reduced_capacity(detail);
        problem.retry_after = Some(seconds);
        problem.priority = Some(self.priority);
        problem.into_response()
    }
}

/// The detail of a shed request's 503, checked to name `priority` and to ask for a retry after
/// `retry_after` seconds: for the tests of both shedders.
#[cfg(test)]
pub(crate) fn shed_detail(
    response: &Response<Bytes>,
    priority: Priority,
    retry_after: u64,
) -> String {
    let body = crate::response::problem_body(response, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["priority"], serde_json::to_value(priority).unwrap());
    assert_eq!(body["retry_after"], retry_after);
    body["detail"].as_str().unwrap().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shed_request_is_told_its_priority_and_when_to_retry() {
        let shedding = Shedding::new(Priority::Low, 0.25, 1.0, Duration::from_millis(4_100));
        let response = shedding.default_response();
        assert_eq!(
            shed_detail(&response, Priority::Low, 5),
            "The service is overloaded and refuses 25% of low priority requests to recover. \
             Retry after 5 seconds."
        );
    }
}
