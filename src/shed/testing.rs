//! What the tests of both shedders check in a shed request's answer.

use bytes::Bytes;
use http::{Response, StatusCode};

use super::Priority;

/// The detail of a shed request's 503, checked to name `priority` and to ask for a retry after
/// `retry_after` seconds: for the tests of both shedders.
pub(crate) fn shed_detail(
    response: &Response<Bytes>,
    priority: Priority,
    retry_after: u64,
) -> String {
    let body = crate::respond::problem_body(response, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["priority"], serde_json::to_value(priority).unwrap());
    assert_eq!(body["retry_after"], retry_after);
    body["detail"].as_str().unwrap().to_owned()
}
