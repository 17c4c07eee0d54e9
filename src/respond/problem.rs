//! [`Problem`]: the body of every default refusal, RFC 9457 problem details
//! (`application/problem+json`).

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;

/// The problem type of a request over a quota (registered with IANA by the IETF rate-limit
/// headers draft), with the `violated-policies` it names.
pub(super) const QUOTA_EXCEEDED: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The problem type of a request refused while the service sheds load.
#[cfg(feature = "shed")]
pub(super) const TEMPORARY_REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// A problem+json body.
#[derive(Serialize)]
pub(super) struct Problem<P: Serialize = ()> {
    r#type: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) retry_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) priority: Option<P>,
    /// For [`QUOTA_EXCEEDED`]: the policies (rules, limits) the request violated.
    #[serde(rename = "violated-policies", skip_serializing_if = "Option::is_none")]
    pub(super) violated_policies: Option<Vec<String>>,
}

impl<P: Serialize> Problem<P> {
    /// A problem of `status`, described by `detail`.
    pub(super) fn new(status: StatusCode, detail: String) -> Self {
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
    pub(super) fn quota_exceeded(detail: String, violated: Vec<String>) -> Self {
        Self {
            r#type: QUOTA_EXCEEDED,
            title: "Request cannot be satisfied as assigned quota has been exceeded",
            violated_policies: Some(violated),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, detail)
        }
    }

    /// A request refused while the service sheds load: [`TEMPORARY_REDUCED_CAPACITY`], 503.
    #[cfg(feature = "shed")]
    pub(super) fn reduced_capacity(detail: String) -> Self {
        Self {
            r#type: TEMPORARY_REDUCED_CAPACITY,
            title: "Temporary reduced capacity",
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, detail)
        }
    }

    /// The response: this body, its status and content type.
    pub(super) fn into_response(self) -> Response<Bytes> {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        problem_response(status, self.to_body())
    }

    /// The body, as JSON.
    pub(super) fn to_body(&self) -> Bytes {
        // Most bodies are 200 to 400 bytes: one allocation, not a doubling series.
        let mut body = Vec::with_capacity(384);
        match serde_json::to_writer(&mut body, self) {
            Ok(()) => Bytes::from(body),
            Err(_) => Bytes::new(),
        }
    }
}

/// A problem+json response of `status` with `body`.
pub(super) fn problem_response(status: StatusCode, body: Bytes) -> Response<Bytes> {
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
