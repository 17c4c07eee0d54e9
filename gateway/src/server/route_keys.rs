//! Each route's key extractor, so that the access log can name a request's key (as a digest)
//! without the layer handing it out.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use http::Request;
use tower_redis_ratelimit::key::KeyExtractor;

/// Each route's key extractor, by route name; cheap to clone.
#[derive(Clone, Default)]
pub struct RouteKeys(Arc<BTreeMap<String, Arc<dyn KeyExtractor>>>);

impl RouteKeys {
    /// The extractors `keys` holds.
    pub fn new(keys: BTreeMap<String, Arc<dyn KeyExtractor>>) -> Self {
        Self(Arc::new(keys))
    }

    /// The key `route` counts `request` under, if it finds one.
    pub fn key(&self, route: &str, request: Request<Body>) -> (Request<Body>, Option<Vec<u8>>) {
        let Some(extractor) = self.0.get(route) else {
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
