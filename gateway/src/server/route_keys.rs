//! Each route's key extractor, so that the access log can name a request's key (as a digest)
//! without the layer handing it out.

use std::borrow::Cow;
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

/// The routes a request went through, as the access log names them: the narrowest first,
/// joined by `,` (`search,api`); the key logged is the narrowest one's.
#[derive(Clone, Debug)]
pub struct RouteNames<'a> {
    narrowest: &'a str,
    joined: Cow<'a, str>,
}

impl<'a> RouteNames<'a> {
    /// The names of `routes` (the narrowest first, as `Limits::routes_for` gives them); `None`
    /// when there are none. Allocates only for a path of two routes or more.
    pub fn of<T>(mut routes: impl Iterator<Item = (&'a str, T)>) -> Option<Self> {
        let (narrowest, _) = routes.next()?;
        let mut joined = Cow::Borrowed(narrowest);
        for (name, _) in routes {
            let joined = joined.to_mut();
            joined.push(',');
            joined.push_str(name);
        }
        Some(Self { narrowest, joined })
    }

    /// The narrowest route's name: the one whose key the log names.
    pub fn narrowest(&self) -> &'a str {
        self.narrowest
    }

    /// Every name, the narrowest first, joined by `,`.
    pub fn as_str(&self) -> &str {
        &self.joined
    }
}
