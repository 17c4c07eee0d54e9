//! What `serve`'s limits stand in front of: a service that only says "admitted", so that the
//! layers' own answers (headers, refusals, failure modes, shadow mode) are exactly those
//! `proxy` gives.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use http::{Request, Response};
use tower_redis_ratelimit::Decision;

use crate::runtime::Boxed;

/// On an admitted answer: whether a limit decided to admit it (rather than skipped it: a store
/// failing open, a request without a key under `missing_key = "skip"`, an allowed key).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Admitted {
    pub(crate) decided: bool,
    /// How long its limits made it wait before it was admitted (routes' `max_delay`): the
    /// answer to the gateway waits as long, as nginx's own `limit_req` would.
    pub(crate) waited: Duration,
}

/// The service behind the layers: every request that reaches it is admitted.
pub(crate) fn admitted() -> Boxed {
    Boxed::new(tower::service_fn(|request: Request<Body>| {
        let decided = request.extensions().get::<Decision>().is_some();
        let waited = crate::runtime::waited(request.extensions());
        let mut response = Response::new(Body::empty());
        response
            .extensions_mut()
            .insert(Admitted { decided, waited });
        std::future::ready(Ok::<_, Infallible>(response))
    }))
}
