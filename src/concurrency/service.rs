//! [`ConcurrencyLimit`]: the tower service made by [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer)
//! and [`FleetShedLayer`](crate::shed::FleetShedLayer).

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::future::ResponseFuture;
use super::{ConcurrencyBody, Config};

/// Limits how many requests are in flight at once. Made by
/// [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer) (per key, 429) and
/// [`FleetShedLayer`](crate::shed::FleetShedLayer) (fleet-wide by priority, 503).
///
/// As [`RateLimit`](crate::RateLimit): the error type is the inner service's, a refusal is a
/// response, `poll_ready` only asks the inner service, and every clone shares the same slots
/// (they live in the store).
#[derive(Clone, Debug)]
pub struct ConcurrencyLimit<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> ConcurrencyLimit<S> {
    pub(crate) fn from_config(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, without the limit.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ConcurrencyBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let config = &self.config;
        let (mut parts, body) = request.into_parts();
        let key = match config.key.extract(&parts) {
            Ok(key) => key,
            Err(err) if config.missing_key.skips(&err) => {
                return ResponseFuture::unlimited(
                    self.inner.call(Request::from_parts(parts, body)),
                );
            }
            Err(err) => return ResponseFuture::rejected(config.reject_missing_key(&err)),
        };
        let (mut acquire, ticket) = config.acquire(&mut parts, key);
        let request = Request::from_parts(parts, body);
        match acquire.take_ready() {
            // A synchronous store answered at once: no clone of the service, no timer.
            Some(result) => {
                ResponseFuture::next(config.decide(result, request, ticket), &mut self.inner)
            }
            None => {
                // The ready service goes into the future; this one keeps a fresh clone, which
                // will be polled ready before its next call.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::acquiring(acquire, ticket, inner, request, self.config.clone())
            }
        }
    }
}
