//! Services behind the layers a request's path calls for, boxed so that any number of layers
//! (or none) make one type.

use std::convert::Infallible;

use axum::body::Body;
use http::{Request, Response};
use tower::Layer;
use tower::util::{BoxCloneSyncService, MapResponseLayer};

use super::BoxError;

/// A service of requests and answers with the gateway's body, boxed.
pub type Boxed = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// `service` behind `layer` (a rate limit, a concurrency limit), boxed again.
pub fn behind<L, B>(layer: &L, service: Boxed) -> Boxed
where
    L: Layer<Boxed>,
    L::Service: tower::Service<Request<Body>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<Request<Body>>>::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes, Error: Into<BoxError>> + Send + 'static,
{
    Boxed::new(
        MapResponseLayer::new(|response: Response<B>| response.map(Body::new))
            .layer(layer.layer(service)),
    )
}
