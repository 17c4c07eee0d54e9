//! [`Admission`]: the one tower service every middleware of this crate is.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::admit::Admit;
use super::body::ResponseBody;
use super::core::{Core, Keyed};
use super::future::ResponseFuture;

/// A service that decides whether each request may reach the inner service: a rate limit, a
/// concurrency limit or a load shedder, depending on `A`. Made by an
/// [`AdmissionLayer`](super::AdmissionLayer), and named by each middleware's own alias
/// ([`RateLimit`](crate::rate::RateLimit), ...).
///
/// The error type is the inner service's: a refusal is a response (429, 400 or 503), never an
/// error, so the service fits axum, which needs infallible services. `poll_ready` only asks the
/// inner service; all accounting happens in `call`, against the shared store, so every clone of
/// the service enforces the same limit.
pub struct Admission<S, A: Admit> {
    inner: S,
    core: Arc<Core<A>>,
}

impl<S, A: Admit> Admission<S, A> {
    pub(crate) fn new(inner: S, core: Arc<Core<A>>) -> Self {
        Self { inner, core }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, without the middleware.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, A: Admit> Clone for Admission<S, A> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            core: self.core.clone(),
        }
    }
}

impl<S: fmt::Debug, A: Admit + fmt::Debug> fmt::Debug for Admission<S, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("inner", &self.inner)
            .field("core", &self.core)
            .finish()
    }
}

impl<S, A, ReqBody, ResBody> Service<Request<ReqBody>> for Admission<S, A>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    A: Admit,
{
    type Response = Response<ResponseBody<ResBody, A::Held>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody, A>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let core = &self.core;
        let (mut parts, body) = request.into_parts();
        let key = match core.key(&parts) {
            Keyed::Check(key) => key,
            Keyed::Unlimited => {
                return ResponseFuture::unlimited(
                    self.inner.call(Request::from_parts(parts, body)),
                );
            }
            Keyed::Refused(response) => return ResponseFuture::rejected(response),
        };
        let span = core.span();
        let entered = span.enter();
        let (mut answer, pending) = core.admit.check(key, &mut parts);
        let mut request = Request::from_parts(parts, body);
        match answer.take_ready() {
            // Answered at once (an in-process store, a shedder): no clone of the service, no timer.
            Some(result) => {
                let next = core.settle(result, pending, &mut request);
                drop(entered);
                ResponseFuture::next(next, request, &mut self.inner)
            }
            None => {
                drop(entered);
                // The ready service goes into the future; this one keeps a fresh clone, which
                // will be polled ready before its next call.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                let core = self.core.clone();
                ResponseFuture::checking(answer, pending, inner, request, core, span)
            }
        }
    }
}
