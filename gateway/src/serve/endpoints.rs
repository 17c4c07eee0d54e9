//! The endpoints a gateway asks at, and the shape of the answer each one's gateway expects. The
//! one place where a path (or a path prefix) is given its endpoint.

use axum::body::Body;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Response, StatusCode};

use super::original::{X_FORWARDED_URI, X_ORIGINAL_URI};

/// The status of a refusal, on a `/auth_request` answer (always 403): nginx accepts only 2xx,
/// 401 and 403 from its subrequest, so the real status travels here for its `error_page` to
/// answer with (429, 503, 400, 403).
pub const REJECTION_STATUS: HeaderName = HeaderName::from_static("rejection-status");

/// What a gateway asks through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endpoint {
    /// `/auth_request`: nginx's `auth_request`. Admitted: 204 with the rate-limit headers;
    /// refused: 403 with them and [`REJECTION_STATUS`].
    AuthRequest,
    /// `/forward_auth`: Traefik's ForwardAuth, Caddy's `forward_auth`. Admitted: 200 with the
    /// rate-limit headers; refused: the limit's own answer (429 and its body), which the
    /// gateway passes to the client.
    ForwardAuth,
}

impl Endpoint {
    /// The endpoint at `path`, if any.
    pub fn at(path: &str) -> Option<Endpoint> {
        match path {
            "/auth_request" => Some(Endpoint::AuthRequest),
            "/forward_auth" => Some(Endpoint::ForwardAuth),
            _ => None,
        }
    }

    /// The header in which this endpoint's gateway names the request's target: nginx's
    /// `proxy_set_header X-Original-URI $request_uri`, Traefik's and Caddy's own
    /// `X-Forwarded-Uri`. The other one is never read here: the gateway passes it on from the
    /// client as it came.
    pub fn target(self) -> HeaderName {
        match self {
            Endpoint::AuthRequest => X_ORIGINAL_URI,
            Endpoint::ForwardAuth => X_FORWARDED_URI,
        }
    }

    /// `answer`, what the limits answered (2xx when admitted, else a refusal with its body),
    /// shaped as this endpoint's gateway expects it.
    pub fn shape(self, answer: Response<Body>) -> Response<Body> {
        let admitted = answer.status().is_success();
        match (self, admitted) {
            (Endpoint::ForwardAuth, false) => answer,
            (Endpoint::ForwardAuth, true) => headers_only(answer, StatusCode::OK),
            (Endpoint::AuthRequest, true) => headers_only(answer, StatusCode::NO_CONTENT),
            (Endpoint::AuthRequest, false) => {
                let status = answer.status();
                let mut shaped = headers_only(answer, StatusCode::FORBIDDEN);
                shaped
                    .headers_mut()
                    .insert(REJECTION_STATUS, HeaderValue::from(status.as_u16()));
                shaped
            }
        }
    }
}

/// `answer`'s headers, without its body, under `status`.
fn headers_only(answer: Response<Body>, status: StatusCode) -> Response<Body> {
    let (mut parts, _) = answer.into_parts();
    parts.status = status;
    parts.headers.remove(CONTENT_TYPE);
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}
