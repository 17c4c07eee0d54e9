//! [`ResponseFuture`]: waiting for a slot, then calling the service or answering early.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::layer::{Next, Ticket};
use super::{Acquired, ConcurrencyBody, ConcurrencyPermit, Config};
use crate::ResponseBody;
use crate::deadline::Deadline;
use crate::headers::Stamp;
use crate::store::StoreFuture;

pin_project! {
    /// The response future of [`ConcurrencyLimit`](super::ConcurrencyLimit).
    ///
    /// Dropping it gives the slot back: while waiting for the store (the store may admit the
    /// permit after all), and while the service runs (the client went away).
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<Request<B>>,
    {
        // Waiting for the store, holding the ready service and the request.
        Acquiring {
            #[pin]
            acquire: Deadline<StoreFuture<Acquired>>,
            ticket: Option<Ticket>,
            inner: Option<S>,
            request: Option<Request<B>>,
            config: Arc<Config>,
        },
        // The service is handling the request, holding the permit.
        Calling {
            #[pin]
            future: S::Future,
            permit: Option<ConcurrencyPermit>,
            stamp: Option<Stamp>,
        },
        // Answered by the limiter.
        Rejected {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn acquiring(
        acquire: StoreFuture<Acquired>,
        ticket: Ticket,
        inner: S,
        request: Request<B>,
        config: Arc<Config>,
    ) -> Self {
        let acquire = Deadline::new(acquire, config.deadline);
        let state = State::Acquiring {
            acquire,
            ticket: Some(ticket),
            inner: Some(inner),
            request: Some(request),
            config,
        };
        Self { state }
    }

    pub(crate) fn next(next: Next<B>, inner: &mut S) -> Self {
        match next {
            Next::Pass(request, permit, stamp) => Self {
                state: State::Calling {
                    future: inner.call(request),
                    permit,
                    stamp: Some(stamp),
                },
            },
            Next::Reject(response) => Self::rejected(response),
        }
    }

    pub(crate) fn unlimited(future: S::Future) -> Self {
        Self {
            state: State::Calling {
                future,
                permit: None,
                stamp: None,
            },
        }
    }

    pub(crate) fn rejected(response: Response<Bytes>) -> Self {
        Self {
            state: State::Rejected {
                response: Some(response),
            },
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ConcurrencyBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Acquiring {
                    acquire,
                    ticket,
                    inner,
                    request,
                    config,
                } => {
                    let result = ready!(acquire.poll(cx));
                    let (Some(ticket), Some(mut inner), Some(request)) =
                        (ticket.take(), inner.take(), request.take())
                    else {
                        unreachable!("the acquiring state is left as soon as the store answers")
                    };
                    let next = match config.decide(result, request, ticket) {
                        Next::Pass(request, permit, stamp) => State::Calling {
                            future: inner.call(request),
                            permit,
                            stamp: Some(stamp),
                        },
                        Next::Reject(response) => State::Rejected {
                            response: Some(response),
                        },
                    };
                    state.set(next);
                }
                StateProj::Calling {
                    future,
                    permit,
                    stamp,
                } => {
                    // An error drops the permit with this future: the slot is given back.
                    let mut response = ready!(future.poll(cx))?;
                    if let Some(stamp) = stamp.take() {
                        stamp.apply(response.headers_mut());
                    }
                    let permit = permit.take();
                    return Poll::Ready(Ok(response
                        .map(|body| ConcurrencyBody::new(ResponseBody::inner(body), permit))));
                }
                StateProj::Rejected { response } => {
                    let response = response
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(response
                        .map(|body| ConcurrencyBody::new(ResponseBody::rejection(body), None))));
                }
            }
        }
    }
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Acquiring { .. } => "acquiring",
            State::Calling { .. } => "calling",
            State::Rejected { .. } => "rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
