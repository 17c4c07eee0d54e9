//! [`Routes`]: the services of one loaded configuration, and the one a request goes through.

use std::convert::Infallible;

use axum::body::Body;
use http::{Request, Response};
use tower::Layer;
use tower::util::{BoxCloneSyncService, MapResponseLayer};

use super::forward::{self, Forward};
use super::load::Loaded;
use crate::server::BoxError;

/// The upstream behind some layers, boxed.
pub(crate) type Proxied = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

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

    /// The service for `request`, whose path is normalised: the upstream behind the WebSocket
    /// limit for an upgrade, its path's concurrency limit, and its path's rate limit, outermost
    /// (refusing is cheapest there).
    ///
    /// The WebSocket limit is innermost so that its permit is the one the request carries to
    /// [`Forward`], which holds it for the tunnel's life (the request extensions keep one
    /// permit, the last inserted); a path's concurrency slot ends with the `101` answer.
    pub(crate) fn service(&self, request: &Request<Body>) -> Proxied {
        let path = request.uri().path();
        let limits = &self.loaded.limits;
        let mut service = self.upstream.clone();
        if let Some(limit) = &self.loaded.websockets
            && forward::is_upgrade(request)
        {
            service = limited(limit, service);
        }
        if let Some((_, limit)) = limits.concurrency_for(path) {
            service = limited(limit, service);
        }
        if let Some((_, layer)) = limits.route_for(path) {
            service = limited(layer, service);
        }
        service
    }
}

/// `service` behind `layer`, boxed again.
fn limited<L, B>(layer: &L, service: Proxied) -> Proxied
where
    L: Layer<Proxied>,
    L::Service: tower::Service<Request<Body>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<Request<Body>>>::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes, Error: Into<BoxError>> + Send + 'static,
{
    Proxied::new(
        MapResponseLayer::new(|response: Response<B>| response.map(Body::new))
            .layer(layer.layer(service)),
    )
}
