//! `POST /reset` on the admin address: a route's key, or an Envoy descriptor's counter, reset in
//! the limits in force (in every instance sharing a Redis store), for a caller the
//! [`AdminAccess`] lets in.

use axum::body::Body;
use http::header::WWW_AUTHENTICATE;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};

use super::admin_access::AdminAccess;
use super::reset::{ResetError, ResetTarget, Resetter};
use super::text::text;

/// The largest body taken: a route's name and a key, or a descriptor of a few entries.
const MAX_BODY: usize = 64 * 1024;

/// Answers a `POST /reset`.
pub(super) async fn reset(
    request: Request<hyper::body::Incoming>,
    access: &AdminAccess,
    resetter: &Resetter,
) -> Response<Body> {
    if !access.allows(request.headers()) {
        let mut refused = text(
            StatusCode::UNAUTHORIZED,
            "send the file's admin_token as `Authorization: Bearer <token>`\n".to_owned(),
        );
        refused.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"ratelimit-gateway admin\""),
        );
        return refused;
    }
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(err) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body (at most {MAX_BODY} bytes): {err}\n"),
            );
        }
    };
    let target = match ResetTarget::from_json(&body) {
        Ok(target) => target,
        Err(err) => return refusal(&err),
    };
    // A reset is an operator's action worth a line; the key is not in it (an API key is a
    // secret, and the access log never writes keys either), nor a descriptor's values.
    let logged = match &target {
        ResetTarget::Route { route, .. } => format!("route {route}"),
        ResetTarget::Descriptor { domain, .. } => format!("domain {domain}"),
    };
    match resetter(target).await {
        Ok(done) => {
            tracing::info!(of = %logged, "reset through the admin address");
            // What was reset, told to the one who asked (and named it).
            text(StatusCode::OK, format!("{done}\n"))
        }
        Err(err) => {
            // A store's failure is the operator's to know; a name that matches nothing is
            // the caller's mistake, answered to the caller (and may carry a descriptor's values).
            if let ResetError::Store(store) = &err {
                tracing::warn!(of = %logged, error = %store, "reset through the admin address failed");
            }
            refusal(&err)
        }
    }
}

fn refusal(err: &ResetError) -> Response<Body> {
    let status = match err {
        ResetError::Invalid(_) => StatusCode::BAD_REQUEST,
        ResetError::Unknown(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    text(status, format!("not reset: {err}\n"))
}
