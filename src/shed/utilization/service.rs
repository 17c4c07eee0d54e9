//! [`UtilizationShed`], the service, and its [`UtilizationShedFuture`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::in_flight::{InFlightBody, InFlightGuard};
use super::layer::{Admission, Shared};
use crate::ResponseBody;

/// Sheds requests to a service while its instance is overloaded. Made by
/// [`UtilizationShedLayer`](crate::shed::UtilizationShedLayer).
///
/// The decision needs no I/O, so `call` decides at once and calls the inner service directly;
/// `poll_ready` only asks the inner service. The error type is the inner service's: a shed
/// request is a 503 response.
#[derive(Clone, Debug)]
pub struct UtilizationShed<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> UtilizationShed<S> {
    pub(crate) fn from_shared(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, without the shedder.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for UtilizationShed<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<InFlightBody<ResBody>>>;
    type Error = S::Error;
    type Future = UtilizationShedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        let state = match self.shared.admit(&mut parts) {
            Admission::Admitted(guard) => State::Calling {
                future: self.inner.call(Request::from_parts(parts, body)),
                guard: Some(guard),
            },
            Admission::Shed(response) => State::Shed {
                response: Some(response),
            },
        };
        UtilizationShedFuture { state }
    }
}

pin_project! {
    /// The response future of [`UtilizationShed`]. While it lives, its request counts as in
    /// flight; then its response body carries the count until it has been sent.
    pub struct UtilizationShedFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Calling {
            #[pin]
            future: F,
            guard: Option<InFlightGuard>,
        },
        Shed {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<F, B, E> Future for UtilizationShedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<InFlightBody<B>>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Calling { future, guard } => {
                let result = ready!(future.poll(cx));
                let guard = guard
                    .take()
                    .expect("UtilizationShedFuture polled after completion");
                // On an error the guard drops here: there is no body left to send.
                Poll::Ready(result.map(|response| {
                    response.map(|body| ResponseBody::inner(InFlightBody::new(body, Some(guard))))
                }))
            }
            StateProj::Shed { response } => {
                let response = response
                    .take()
                    .expect("UtilizationShedFuture polled after completion");
                Poll::Ready(Ok(response.map(ResponseBody::rejection)))
            }
        }
    }
}

impl<F> std::fmt::Debug for UtilizationShedFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Calling { .. } => "calling",
            State::Shed { .. } => "shed",
        };
        f.debug_struct("UtilizationShedFuture")
            .field("state", &state)
            .finish()
    }
}
