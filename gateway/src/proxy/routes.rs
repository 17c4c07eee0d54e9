//! [`Routes`]: the services of one loaded configuration, and the one a request goes through.

use axum::body::Body;
use http::Request;

use super::forward::Forward;
use super::headers::is_upgrade;
use super::load::Loaded;
use crate::server::{Boxed, RouteNames, behind as limited};

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

    /// The service for `request`, whose path is normalised, and the names of the routes that
    /// limit it (the access log's, `None` when none does): the upstream behind the WebSocket
    /// limit for an upgrade, its path's concurrency limits, and its path's routes, outermost
    /// (refusing is cheapest there). Limits of one kind stack the narrowest outermost, as
    /// [`Limits::routes_for`](tower_redis_ratelimit::config::Limits::routes_for) says.
    ///
    /// The WebSocket limit is innermost so that its permit is the one the request carries to
    /// [`Forward`], which holds it for the tunnel's life (the request extensions keep one
    /// permit, the last inserted); a path's concurrency slots end with the `101` answer.
    pub(crate) fn service(&self, request: &Request<Body>) -> (Proxied, Option<RouteNames<'_>>) {
        let path = request.uri().path();
        let limits = &self.loaded.limits;
        let mut service = self.upstream.clone();
        if let Some(limit) = &self.loaded.websockets
            && is_upgrade(request)
        {
            service = limited(limit, service);
        }
        for (_, limit) in limits.concurrency_for(path).rev() {
            service = limited(limit, service);
        }
        let routes = limits.routes_for(path);
        for (_, layer) in routes.clone().rev() {
            service = limited(layer, service);
        }
        (service, RouteNames::of(routes))
    }
}
