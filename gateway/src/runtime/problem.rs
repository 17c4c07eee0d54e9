//! The gateway's own answers, as problem+json bodies (RFC 9457): a request it cannot forward
//! or decide on says why.

use axum::body::Body;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};

/// A problem+json answer of the gateway's own: `status` and what went wrong.
pub fn problem(status: StatusCode, detail: &str) -> Response<Body> {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "detail": detail,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}
