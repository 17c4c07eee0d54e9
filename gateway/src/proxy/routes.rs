//! [`Routes`]: the services of one loaded configuration, and the one a request goes through.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use http::Request;
use tower_redis_ratelimit::key::KeyExtractor;

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
    /// Each route's key, for the access log's digest.
    keys: BTreeMap<String, Arc<dyn KeyExtractor>>,
}

impl Routes {
    pub(crate) fn new(loaded: Loaded, forward: &Forward) -> Self {
        let keys = loaded
            .keys
            .iter()
            .map(|(name, key)| (name.clone(), Arc::clone(key)))
            .collect();
        Self {
            loaded,
            upstream: Proxied::new(forward.clone()),
            keys,
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

    /// The key `route` counts `request` under, if it finds one.
    pub(crate) fn key(
        &self,
        route: &str,
        request: Request<Body>,
    ) -> (Request<Body>, Option<Vec<u8>>) {
        let Some(extractor) = self.keys.get(route) else {
            return (request, None);
        };
        let (parts, body) = request.into_parts();
        let key = extractor
            .extract(&parts)
            .ok()
            .map(|key| key.as_bytes().to_vec());
        (Request::from_parts(parts, body), key)
    }
}
