//! A request with its path normalised as routes match it ([`crate::paths`]), or the `400`
//! answer to one that cannot be.

use std::borrow::Cow;

use axum::body::Body;
use http::{Request, Response, StatusCode};

use super::problem;
use crate::paths::normalise;

/// `request` with its path normalised, or the 400 answer to a path that cannot be.
pub fn normalised<B>(mut request: Request<B>) -> Result<Request<B>, Box<Response<Body>>> {
    match normalise(request.uri().path()) {
        Ok(Cow::Borrowed(_)) => Ok(request),
        Ok(Cow::Owned(path)) => match with_path(request.uri(), &path) {
            // Forwarded as matched: the upstream serves what was limited.
            Some(uri) => {
                *request.uri_mut() = uri;
                Ok(request)
            }
            None => Err(Box::new(problem(
                StatusCode::BAD_REQUEST,
                "The request's target cannot be forwarded.",
            ))),
        },
        Err(err) => Err(Box::new(problem(
            StatusCode::BAD_REQUEST,
            &format!("{err}."),
        ))),
    }
}

/// `uri` with its path replaced by `path` (its query kept).
fn with_path(uri: &http::Uri, path: &str) -> Option<http::Uri> {
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}
