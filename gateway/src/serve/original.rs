//! The request a gateway asks about, rebuilt from its question: the method and target it names
//! (`X-Forwarded-Method`, and the target in its endpoint's header: `X-Original-URI` or
//! `X-Forwarded-Uri`), the headers it passed on, and the client's address as the peer, so that
//! routes, keys and plans see it as `proxy` would.

use std::net::SocketAddr;

use axum::body::Body;
use http::{HeaderName, Method, Request, Response, StatusCode, Uri};

use super::client::Gateways;
use crate::runtime::normalised;
use crate::runtime::problem;

/// The target as nginx passes it (`$request_uri`).
pub const X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
/// The target as Traefik and Caddy pass it.
pub const X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
/// The method as Traefik and Caddy pass it (and nginx, configured to).
pub const X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");

/// The request that `question` asks about, its target read from `target` (the header its
/// endpoint's gateway writes), its path normalised and its client as its peer; or the 400
/// answer to a question that does not say which request it is about.
///
/// Only `target` is read: a gateway passes the client's own headers on with its question
/// (Traefik and Caddy pass them all), so the other endpoint's header may be the client's
/// writing, naming a path of no route.
pub(crate) fn original(
    question: Request<hyper::body::Incoming>,
    target: &HeaderName,
    gateways: &Gateways,
) -> Result<Request<Body>, Box<Response<Body>>> {
    // The question's body, if any, is not the request's: it is never read.
    let (mut parts, _) = question.into_parts();
    let bad = |detail: &str| Box::new(problem(StatusCode::BAD_REQUEST, detail));
    let target = one(&parts.headers, target)
        .map_err(|name| bad(&format!("{name} is sent more than once.")))?
        .ok_or_else(|| {
            bad(&format!(
                "The question names no request: send its target in {target}."
            ))
        })?;
    let uri = target
        .to_str()
        .ok()
        .and_then(|target| target.parse::<Uri>().ok())
        .and_then(origin_form)
        .ok_or_else(|| bad("The request's target is not a path (and query)."))?;
    if let Some(method) = one(&parts.headers, &X_FORWARDED_METHOD)
        .map_err(|name| bad(&format!("{name} is sent more than once.")))?
    {
        parts.method = Method::from_bytes(method.as_bytes())
            .map_err(|_| bad("X-Forwarded-Method is not a method."))?;
    }
    let client = gateways
        .client(&parts)
        .map_err(|err| bad(&format!("{}.", err.message())))?;
    // The client stands where `proxy` sees it: as the peer.
    parts.extensions.insert(SocketAddr::new(client, 0));
    parts.uri = uri;
    normalised(Request::from_parts(parts, Body::empty()))
}

/// `uri` as a path and query: itself when it is one (origin form, `/api/x?q=1`), its path and
/// query when absolute (`http://host/api/x`, which servers must accept and serve as its path);
/// none for the other forms (`host:443`, `*`) and for what is neither.
fn origin_form(uri: Uri) -> Option<Uri> {
    let origin = uri.path_and_query()?.clone();
    (origin.as_str().starts_with('/') && (uri.scheme().is_some() || uri.authority().is_none()))
        .then(|| Uri::from(origin))
}

/// The one value of `name`, none, or the name when there are several (which one the gateway
/// meant is not for us to guess).
fn one<'a>(
    headers: &'a http::HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a http::HeaderValue>, HeaderName> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (first, None) => Ok(first),
        _ => Err(name.clone()),
    }
}
