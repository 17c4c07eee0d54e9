//! A plain-text answer: what the admin address says to an operator or a prober.

use axum::body::Body;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};

/// `body` as `text/plain` with `status`.
pub(super) fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
