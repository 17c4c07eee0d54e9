//! The default answers to refusals, a function for each: no key (400), a denied key (403), a
//! store that failed (503), a full concurrency slot (429), shed load (503). A rate limit's 429
//! is [`rate_limited`](super::rate_limited::rate_limited).
//!
//! They take plain values, not the middlewares' rejection types: each rejection's
//! `default_response` calls the function here, so the wording of every refusal is in one place
//! and this module depends on no middleware.

#[cfg(feature = "shed")]
use std::fmt::Display;
#[cfg(feature = "concurrency")]
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
#[cfg(feature = "shed")]
use serde::Serialize;

#[cfg(feature = "concurrency")]
use super::headers::retry_seconds;
use super::problem::Problem;
use crate::key::KeyError;

/// The 400 of a request without a usable key.
pub(crate) fn missing_key(err: &KeyError) -> Response<Bytes> {
    let detail = format!("This request cannot be rate limited: {}.", err.message());
    Problem::<()>::new(StatusCode::BAD_REQUEST, detail).into_response()
}

/// The 403 of a key on a layer's deny list. The key is not repeated: it may be a secret (an API
/// key), and the client knows it.
pub(crate) fn denied() -> Response<Bytes> {
    let detail = "Requests like this one are refused.";
    Problem::<()>::new(StatusCode::FORBIDDEN, detail.into()).into_response()
}

/// The 503 of a layer that fails closed while its store fails.
pub(crate) fn unavailable() -> Response<Bytes> {
    let detail =
        "Rate limiting is temporarily unavailable, so requests are refused. Retry shortly.";
    let mut problem = Problem::<()>::new(StatusCode::SERVICE_UNAVAILABLE, detail.into());
    problem.retry_after = Some(1);
    problem.into_response()
}

/// The 429 of a request whose concurrency slot is full: the limit `name` admits `limit` at once
/// and `in_flight` are in flight.
#[cfg(feature = "concurrency")]
pub(crate) fn slot_full(
    name: &str,
    limit: u32,
    in_flight: u64,
    retry_after: Duration,
) -> Response<Bytes> {
    let seconds = retry_seconds(retry_after);
    let detail = format!(
        "Concurrency limit \"{name}\" ({limit} at once) reached: {in_flight} requests are in \
         flight. {}",
        retry_sentence(seconds)
    );
    let mut problem = Problem::<()>::quota_exceeded(detail, vec![name.to_owned()]);
    problem.policy = Some(name.to_owned());
    problem.limit = Some(u64::from(limit));
    problem.retry_after = Some(seconds);
    problem.into_response()
}

/// The 503 of a request of `priority` the fleet shedder refused: such requests may use `limit`
/// of the `capacity` slots of `name`, and `in_flight` are in use.
#[cfg(feature = "shed")]
pub(crate) fn fleet_shed<P: Serialize + Display>(
    priority: P,
    name: &str,
    limit: u32,
    capacity: u32,
    in_flight: u64,
    retry_after: Duration,
) -> Response<Bytes> {
    let seconds = retry_seconds(retry_after);
    let detail = format!(
        "The service is shedding load: {priority} requests may use {limit} of {capacity} slots \
         and {in_flight} are in use. {}",
        retry_sentence(seconds)
    );
    let mut problem = Problem::reduced_capacity(detail);
    problem.policy = Some(name.to_owned());
    problem.limit = Some(u64::from(limit));
    problem.retry_after = Some(seconds);
    problem.priority = Some(priority);
    problem.into_response()
}

/// The 503 of a request of `priority` the utilisation shedder refused, `drop_probability` (0 to
/// 1) of such requests being refused.
#[cfg(feature = "shed")]
pub(crate) fn overloaded<P: Serialize + Display>(
    priority: P,
    drop_probability: f64,
    retry_after: Duration,
) -> Response<Bytes> {
    let seconds = retry_seconds(retry_after);
    let detail = format!(
        "The service is overloaded and refuses {:.0}% of {priority} priority requests to \
         recover. {}",
        drop_probability * 100.0,
        retry_sentence(seconds)
    );
    let mut problem = Problem::reduced_capacity(detail);
    problem.retry_after = Some(seconds);
    problem.priority = Some(priority);
    problem.into_response()
}

/// "Retry after N second(s).", N as `Retry-After` states it.
pub(super) fn retry_sentence(seconds: u64) -> String {
    let plural = if seconds == 1 { "" } else { "s" };
    format!("Retry after {seconds} second{plural}.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::respond::problem_body;

    #[test]
    fn missing_keys_and_outages_have_their_own_status() {
        let err = KeyError::missing("the `x-api-key` header is missing");
        let body = problem_body(&missing_key(&err), StatusCode::BAD_REQUEST);
        assert_eq!(
            body["detail"],
            "This request cannot be rate limited: the `x-api-key` header is missing."
        );
        let body = problem_body(&unavailable(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["retry_after"], 1);
    }

    #[test]
    fn waits_are_told_in_whole_seconds() {
        assert_eq!(retry_sentence(1), "Retry after 1 second.");
        assert_eq!(retry_sentence(7), "Retry after 7 seconds.");
    }
}
