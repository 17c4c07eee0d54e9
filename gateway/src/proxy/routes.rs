//! [`Routes`]: the services of one loaded configuration, and the one a request goes through.

use axum::body::Body;
use http::Request;

use super::forward::Forward;
use super::headers::is_upgrade;
use super::load::Loaded;
use crate::server::{Boxed, behind as limited};

/// The upstream behind some layers, boxed.
pub(crate) type Proxied = Boxed;

/// The services of one configuration: the upstream, behind each request's limits.
pub(crate) struct Routes {
    pub(crate) loaded: Loaded,
    upstream: Proxied,
}

impl Routes {
    pub(crate) fn new(loaded: Loaded, forward: &Forward) -> Self {
        Self {
            loaded,
            upstream: Proxied::new(forward.clone()),
        }
    }

    /// The service for `request`, whose path is normalised, and the name of the route that
    /// limits it: the upstream behind the WebSocket limit for an upgrade, its path's
    /// concurrency limit, and its path's rate limit, outermost (refusing is cheapest there).
    ///
    /// The WebSocket limit is innermost so that its permit is the one the request carries to
    /// [`Forward`], which holds it for the tunnel's life (the request extensions keep one
    /// permit, the last inserted); a path's concurrency slot ends with the `101` answer.
    pub(crate) fn service(&self, request: &Request<Body>) -> (Proxied, Option<&str>) {
        let path = request.uri().path();
        let limits = &self.loaded.limits;
        let mut service = self.upstream.clone();
        if let Some(limit) = &self.loaded.websockets
            && is_upgrade(request)
        {
            service = limited(limit, service);
        }
        if let Some((_, limit)) = limits.concurrency_for(path) {
            service = limited(limit, service);
        }
        let mut route = None;
        if let Some((name, layer)) = limits.route_for(path) {
            service = limited(layer, service);
            route = Some(name);
        }
        (service, route)
    }
}
