//! [`ConcurrencyLimitRejection`]: why a [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer) refused a request.

use bytes::Bytes;
use http::{Response, StatusCode};

use super::Busy;
use crate::key::{Key, KeyError};
use crate::respond;
use crate::store::StoreError;

/// Why a [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer) answered a request itself: what
/// its `on_rejection` hook receives.
///
/// By default each is answered with its [`status`](Self::status) and a problem+json body, which
/// the [headers reference](crate::guide::headers#refusal-bodies) describes.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConcurrencyLimitRejection {
    /// The key's slot is full.
    Busy(Busy),
    /// No key could be extracted and the layer rejects such requests.
    MissingKey(KeyError),
    /// The key is on the layer's deny list ([`Exemptions`](crate::key::Exemptions)).
    Denied(Key),
    /// The store failed and the layer fails closed.
    Unavailable(StoreError),
}

impl ConcurrencyLimitRejection {
    /// The status of the default response: 429, 400 or 503.
    pub fn status(&self) -> StatusCode {
        match self {
            ConcurrencyLimitRejection::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            ConcurrencyLimitRejection::MissingKey(_) => StatusCode::BAD_REQUEST,
            ConcurrencyLimitRejection::Denied(_) => StatusCode::FORBIDDEN,
            ConcurrencyLimitRejection::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The default response: a problem+json body saying what happened.
    pub fn default_response(&self) -> Response<Bytes> {
        match self {
            ConcurrencyLimitRejection::Busy(busy) => respond::slot_full(
                busy.name(),
                busy.limit(),
                busy.in_flight(),
                busy.retry_after(),
            ),
            ConcurrencyLimitRejection::MissingKey(err) => respond::missing_key(err),
            ConcurrencyLimitRejection::Denied(_) => respond::denied(),
            ConcurrencyLimitRejection::Unavailable(_) => respond::unavailable(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::respond::problem_body;

    #[test]
    fn a_full_slot_is_a_429_saying_why_and_when_to_retry() {
        let busy = Busy {
            name: "ws".into(),
            limit: 5,
            capacity: 5,
            in_flight: 5,
            retry_after: Duration::from_millis(2_500),
        };
        let rejection = ConcurrencyLimitRejection::Busy(busy);
        assert_eq!(rejection.status(), StatusCode::TOO_MANY_REQUESTS);
        let response = rejection.default_response();
        let body = problem_body(&response, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(body["retry_after"], 3);
        assert_eq!(body["limit"], 5);
        assert_eq!(
            body["detail"],
            "Concurrency limit \"ws\" (5 at once) reached: 5 requests are in flight. Retry after 3 seconds."
        );
    }
}
