//! [`Shedding`]: what a load shedder knew when it refused a request.

use std::time::Duration;

use super::Priority;

/// Why a load shedder refused a request: carried by
/// [`Rejection::Shed`](crate::Rejection::Shed) to the default 503 and to custom rejections.
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
}
