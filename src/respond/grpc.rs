//! Refusals of gRPC calls, in the form gRPC clients read: a gRPC client ignores an HTTP status
//! other than 200 beyond mapping it to a generic code, and never reads a problem+json body.
//!
//! A request whose `content-type` is `application/grpc` (or `application/grpc+proto`, ...) is
//! refused with a "Trailers-Only" response: HTTP 200, `content-type: application/grpc`, no body,
//! and the status in the headers: `grpc-status` and `grpc-message` (the problem's detail,
//! percent-encoded as gRPC requires). The rate-limit headers (`retry-after`, `ratelimit`,
//! `rate-limiting-*`, ...) stay, and reach the client as response metadata.
//!
//! | HTTP refusal | gRPC status |
//! |---|---|
//! | 429, a quota or a concurrency limit | 8 `RESOURCE_EXHAUSTED` |
//! | 503, shedding or failing closed | 14 `UNAVAILABLE` |
//! | 400, no key | 3 `INVALID_ARGUMENT` |
//! | 403, a key on a deny list | 7 `PERMISSION_DENIED` |

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// Whether a request with these headers is a gRPC call.
pub(super) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// The gRPC form of a refusal made for HTTP clients.
pub(super) fn refusal(response: Response<Bytes>) -> Response<Bytes> {
    let (mut parts, body) = response.into_parts();
    let code = match parts.status {
        StatusCode::TOO_MANY_REQUESTS => "8",
        StatusCode::SERVICE_UNAVAILABLE => "14",
        StatusCode::BAD_REQUEST => "3",
        StatusCode::FORBIDDEN => "7",
        _ => "2",
    };
    let message = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|problem| problem["detail"].as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            parts
                .status
                .canonical_reason()
                .unwrap_or("refused")
                .to_owned()
        });
    parts.status = StatusCode::OK;
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    parts
        .headers
        .insert(GRPC_STATUS, HeaderValue::from_static(code));
    if let Ok(message) = HeaderValue::from_str(&percent_encode(&message)) {
        parts.headers.insert(GRPC_MESSAGE, message);
    }
    Response::from_parts(parts, Bytes::new())
}

/// `grpc-message` encoding: every byte outside printable ASCII, and `%`, as `%XX`.
fn percent_encode(message: &str) -> String {
    let mut encoded = String::with_capacity(message.len());
    for &byte in message.as_bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::respond::problem::Problem;

    #[test]
    fn a_quota_refusal_becomes_resource_exhausted_with_its_headers_kept() {
        let mut problem = Problem::<()>::new(
            StatusCode::TOO_MANY_REQUESTS,
            "Retry after 4 seconds.".into(),
        );
        problem.retry_after = Some(4);
        let mut response = problem.into_response();
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("4"));
        let grpc = refusal(response);
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()[CONTENT_TYPE], "application/grpc");
        assert_eq!(grpc.headers()[GRPC_STATUS], "8");
        assert_eq!(grpc.headers()[GRPC_MESSAGE], "Retry after 4 seconds.");
        assert_eq!(grpc.headers()["retry-after"], "4");
        assert!(grpc.body().is_empty());
    }

    #[test]
    fn shedding_is_unavailable_and_a_missing_key_an_invalid_argument() {
        let shed = Problem::<()>::new(StatusCode::SERVICE_UNAVAILABLE, "100% — busy".into());
        let grpc = refusal(shed.into_response());
        assert_eq!(grpc.headers()[GRPC_STATUS], "14");
        assert_eq!(grpc.headers()[GRPC_MESSAGE], "100%25 %E2%80%94 busy");
        let unkeyed = Problem::<()>::new(StatusCode::BAD_REQUEST, "no key".into());
        assert_eq!(refusal(unkeyed.into_response()).headers()[GRPC_STATUS], "3");
    }

    #[test]
    fn grpc_calls_are_told_by_their_content_type() {
        let mut headers = HeaderMap::new();
        assert!(!is_grpc(&headers));
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/grpc+proto"),
        );
        assert!(is_grpc(&headers));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        assert!(!is_grpc(&headers));
    }
}
