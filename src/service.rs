//! [`RateLimit`]: the tower service made by [`RateLimitLayer`](crate::RateLimitLayer).

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::future::ResponseFuture;
use crate::layer::Config;

/// Rate limits the requests to a service. Made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// The error type is the inner service's: a rejection is a response (429, 400 or 503), never an
/// error, so the service fits axum, which needs infallible services. `poll_ready` only asks the
/// inner service; all accounting happens in `call`, against the shared store, so every clone of
/// the service enforces the same limit.
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> RateLimit<S> {
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

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<crate::ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let config = &self.config;
        let (parts, body) = request.into_parts();
        let key = match config.key.extract(&parts) {
            Ok(key) => key,
            Err(err) if config.missing_key.skips(&err) => {
                return ResponseFuture::unlimited(
                    self.inner.call(Request::from_parts(parts, body)),
                );
            }
            Err(err) => return ResponseFuture::rejected(config.reject_missing_key(&err)),
        };
        let cost = config.cost(&parts);
        let mut check = config.store.check(&key, &config.policy, cost);
        let request = Request::from_parts(parts, body);
        match check.take_ready() {
            // A synchronous store answered at once: no clone of the service, no timer.
            Some(result) => {
                ResponseFuture::next(config.decide(result, request, cost), &mut self.inner)
            }
            None => {
                // The ready service goes into the future; this one keeps a fresh clone, which
                // will be polled ready before its next call.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::checking(check, inner, request, self.config.clone(), cost)
            }
        }
    }
}
