//! [`PathServices`]: the service a request goes through, a base service behind every limit of
//! its path, built once per path prefix when a file is loaded (or reloaded), never per request.
//!
//! A path meets every route whose prefix it starts with (`Limits::routes_for`), and those
//! prefixes are all prefixes of the longest one it matches: so the longest matching prefix,
//! among the routes' and the concurrency limits' together, names the whole stack, and one
//! stack per prefix is every stack there is.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use http::Request;
use tower_redis_ratelimit::config::Limits;
use tower_redis_ratelimit::key::KeyExtractor;

use super::{Boxed, behind};

/// A base service behind the limits of each path prefix, the longest prefix first.
pub struct PathServices {
    prefixes: Vec<(String, Stack)>,
    /// For a path of no prefix: the base alone.
    unrouted: Stack,
}

/// The service of the paths under one prefix, and what the access log says of them.
pub struct Stack {
    service: Boxed,
    /// Every route of the paths, the narrowest first, joined by `,` (`search,api`): the access
    /// log's `route`. None: no route limits them.
    routes: Option<Box<str>>,
    /// The narrowest route's key extractor: the key the access log names.
    key: Option<Arc<dyn KeyExtractor>>,
}

impl PathServices {
    /// `base` behind the limits of each prefix of `limits`: its routes (the narrowest
    /// outermost) in front of its concurrency limits when `concurrency` (the narrowest
    /// outermost too), as `Limits::routes_for` orders them. Rate limits are outermost, so a
    /// refused request never takes a concurrency slot. `keys` are the routes' key extractors
    /// by route name (`File::route_keys`), so that the access log can name a request's key (as
    /// a digest) without the layer handing it out.
    pub fn build(
        limits: &Limits,
        keys: &BTreeMap<String, Arc<dyn KeyExtractor>>,
        base: &Boxed,
        concurrency: bool,
    ) -> Self {
        let mut prefixes: Vec<&str> = limits.route_paths().map(|(prefix, _)| prefix).collect();
        if concurrency {
            prefixes.extend(limits.concurrency_paths().map(|(prefix, _)| prefix));
        }
        prefixes.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        prefixes.dedup();
        let stack = |path: &str| {
            let mut service = base.clone();
            if concurrency {
                for (_, limit) in limits.concurrency_for(path).rev() {
                    service = behind(limit, service);
                }
            }
            let routes = limits.routes_for(path);
            for (_, layer) in routes.clone().rev() {
                service = behind(layer, service);
            }
            let names: Vec<&str> = routes.map(|(name, _)| name).collect();
            Stack {
                service,
                key: names.first().and_then(|name| keys.get(*name).cloned()),
                routes: (!names.is_empty()).then(|| names.join(",").into_boxed_str()),
            }
        };
        Self {
            prefixes: prefixes
                .into_iter()
                .map(|prefix| (prefix.to_owned(), stack(prefix)))
                .collect(),
            unrouted: stack(""),
        }
    }

    /// The stack of `path` (normalised): that of the longest prefix it starts with.
    pub fn for_path(&self, path: &str) -> &Stack {
        self.prefixes
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()))
            .map_or(&self.unrouted, |(_, stack)| stack)
    }
}

impl Stack {
    /// The service, for one request.
    pub fn service(&self) -> Boxed {
        self.service.clone()
    }

    /// The routes that limit these paths, the narrowest first, joined by `,`; none: no route.
    pub fn routes(&self) -> Option<&str> {
        self.routes.as_deref()
    }

    /// The key the narrowest route counts `request` under, if it has a route and finds one.
    pub fn key(&self, request: Request<Body>) -> (Request<Body>, Option<Vec<u8>>) {
        let Some(extractor) = &self.key else {
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
