//! Asking the limits about a request: its route's layer in front of a service that only says
//! "admitted", so that the layer's own answers (headers, refusals, failure modes, shadow mode)
//! are exactly those `proxy` gives.

use std::convert::Infallible;

use axum::body::Body;
use http::{Request, Response};
use tower::ServiceExt;
use tower_redis_ratelimit::{Decision, RateLimitLayer};

use crate::server::{Boxed, behind};

/// On an admitted answer: whether a limit decided to admit it (rather than skipped it: a store
/// failing open, a request without a key under `missing_key = "skip"`, an allowed key).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Admitted {
    pub(crate) decided: bool,
}

/// The service behind the layers: every request that reaches it is admitted.
pub(crate) fn admitted() -> Boxed {
    Boxed::new(tower::service_fn(|request: Request<Body>| {
        let decided = request.extensions().get::<Decision>().is_some();
        let mut response = Response::new(Body::empty());
        response.extensions_mut().insert(Admitted { decided });
        std::future::ready(Ok::<_, Infallible>(response))
    }))
}

/// What the layers of `routes` (the request's path's, the narrowest first; none: no route)
/// answer about `request`: 200 when admitted, else the refusal. They stack the narrowest
/// outermost, as in `proxy`.
pub(crate) async fn decide<'a>(
    routes: impl DoubleEndedIterator<Item = (&'a str, &'a RateLimitLayer)>,
    admit: &Boxed,
    request: Request<Body>,
) -> Response<Body> {
    let mut service = admit.clone();
    for (_, layer) in routes.rev() {
        service = behind(layer, service);
    }
    match service.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
