//! The default bodies of refusals: RFC 9457 problem details (`application/problem+json`).
//!
//! Each middleware's rejection type builds its default response from a [`Problem`]; the refusals
//! every keyed middleware shares (no key, a store that failed) are made here once.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;

use crate::key::KeyError;

/// The problem type of a request over a quota (registered with IANA by the IETF rate-limit
/// headers draft), with the `violated-policies` it names.
pub(crate) const QUOTA_EXCEEDED: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The problem type of a request refused while the service sheds load.
#[cfg(feature = "shed")]
pub(crate) const TEMPORARY_REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// A problem+json body.
#[derive(Serialize)]
pub(crate) struct Problem<P: Serialize = ()> {
    r#type: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority: Option<P>,
    /// For [`QUOTA_EXCEEDED`]: the policies (rules, limits) the request violated.
    #[serde(rename = "violated-policies", skip_serializing_if = "Option::is_none")]
    pub(crate) violated_policies: Option<Vec<String>>,
}

impl<P: Serialize> Problem<P> {
    /// A problem of `status`, described by `detail`.
    pub(crate) fn new(status: StatusCode, detail: String) -> Self {
        Self {
            r#type: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail,
            policy: None,
            limit: None,
            retry_after: None,
            priority: None,
            violated_policies: None,
        }
    }

    /// A request over the quotas of `violated`: [`QUOTA_EXCEEDED`], 429.
    pub(crate) fn quota_exceeded(detail: String, violated: Vec<String>) -> Self {
        Self {
            r#type: QUOTA_EXCEEDED,
            title: "Request cannot be satisfied as assigned quota has been exceeded",
            violated_policies: Some(violated),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, detail)
        }
    }

    /// A request refused while the service sheds load: [`TEMPORARY_REDUCED_CAPACITY`], 503.
    #[cfg(feature = "shed")]
    pub(crate) fn reduced_capacity(detail: String) -> Self {
        Self {
            r#type: TEMPORARY_REDUCED_CAPACITY,
            title: "Temporary reduced capacity",
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, detail)
        }
    }

    /// The response: this body, its status and content type.
    pub(crate) fn into_response(self) -> Response<Bytes> {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        problem_response(status, self.to_body())
    }

    /// The body, as JSON.
    pub(crate) fn to_body(&self) -> Bytes {
        // Most bodies are 200 to 400 bytes: one allocation, not a doubling series.
        let mut body = Vec::with_capacity(384);
        match serde_json::to_writer(&mut body, self) {
            Ok(()) => Bytes::from(body),
            Err(_) => Bytes::new(),
        }
    }
}

/// A problem+json response of `status` with `body`.
pub(crate) fn problem_response(status: StatusCode, body: Bytes) -> Response<Bytes> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    // Room for the headers the layer adds to a refusal, made once.
    *response.headers_mut() = http::HeaderMap::with_capacity(12);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

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

/// "Retry after N second(s).", N as `Retry-After` states it.
pub(crate) fn retry_sentence(seconds: u64) -> String {
    let plural = if seconds == 1 { "" } else { "s" };
    format!("Retry after {seconds} second{plural}.")
}

/// The body of a refusal with `status`, checked to be problem+json stating that status: for the
/// tests of every default response.
#[cfg(test)]
pub(crate) fn problem_body(response: &Response<Bytes>, status: StatusCode) -> serde_json::Value {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
    let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
    assert_eq!(body["status"], status.as_u16(), "{body}");
    body
}

#[cfg(test)]
mod tests {
    use super::*;

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
