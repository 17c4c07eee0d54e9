//! [`ResponseFuture`]: waiting for the store, then calling the service or answering early.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::admit::Admit;
use super::body::ResponseBody;
use super::core::{Core, Next};
use super::deadline::Deadline;
use crate::respond::Stamp;
use crate::store::StoreFuture;

pin_project! {
    /// The response future of [`Admission`](super::Admission).
    ///
    /// Dropping it lets go of what the request holds: while waiting for the store (a concurrency
    /// slot the store may admit all the same is given back), while a rate limit delays it (its
    /// place in the schedule stays spent: the store counted it when it admitted the request),
    /// and while the service runs (the client went away).
    pub struct ResponseFuture<S, B, A>
    where
        S: Service<Request<B>>,
        A: Admit,
    {
        #[pin]
        state: State<S, B, A>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B, A>
    where
        S: Service<Request<B>>,
        A: Admit,
    {
        // Waiting for the store, holding the ready service and the request.
        Checking {
            #[pin]
            answer: Deadline<StoreFuture<A::Answer>>,
            pending: Option<A::Pending>,
            inner: Option<S>,
            request: Option<Request<B>>,
            core: Arc<Core<A>>,
            // The decision's span, entered while the store is polled and the answer settled.
            span: tracing::Span,
        },
        // Admitted to wait (a rate limit's `max_delay`): the ready service and the request are
        // held until the timer fires. Outside the store's deadline, which bounds the store only.
        // The timer is boxed: only a waiting request pays for its size, not every future.
        Waiting {
            sleep: Pin<Box<Sleep>>,
            inner: Option<S>,
            request: Option<Request<B>>,
            stamp: Option<Stamp>,
            held: Option<A::Held>,
        },
        // The service is handling the request; its response gets the stamp, its body what the
        // request holds.
        Calling {
            #[pin]
            future: S::Future,
            stamp: Option<Stamp>,
            held: Option<A::Held>,
        },
        // Answered by the middleware.
        Rejected {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<S, B, A> ResponseFuture<S, B, A>
where
    S: Service<Request<B>>,
    A: Admit,
{
    pub(crate) fn checking(
        answer: StoreFuture<A::Answer>,
        pending: A::Pending,
        inner: S,
        request: Request<B>,
        core: Arc<Core<A>>,
        span: tracing::Span,
    ) -> Self {
        let answer = Deadline::new(answer, core.deadline, A::LIMITING);
        let state = State::Checking {
            answer,
            pending: Some(pending),
            inner: Some(inner),
            request: Some(request),
            core,
            span,
        };
        Self { state }
    }

    pub(crate) fn next(next: Next<A::Held>, request: Request<B>, inner: &mut S) -> Self
    where
        S: Clone,
    {
        Self {
            state: State::after(next, request, inner),
        }
    }

    pub(crate) fn unlimited(future: S::Future) -> Self {
        Self {
            state: State::Calling {
                future,
                stamp: None,
                held: None,
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

impl<S, B, A> State<S, B, A>
where
    S: Service<Request<B>> + Clone,
    A: Admit,
{
    /// The state that carries out `next` on `request`.
    fn after(next: Next<A::Held>, request: Request<B>, inner: &mut S) -> Self {
        match next {
            Next::Pass(stamp, held) => State::Calling {
                future: inner.call(request),
                stamp,
                held,
            },
            Next::Wait(delay, stamp, held) => {
                // The ready service waits with the request; `inner` keeps a fresh clone, which
                // is polled ready before its next call.
                let clone = inner.clone();
                State::Waiting {
                    sleep: Box::pin(tokio::time::sleep(delay)),
                    inner: Some(std::mem::replace(inner, clone)),
                    request: Some(request),
                    stamp,
                    held,
                }
            }
            Next::Reject(response) => State::Rejected {
                response: Some(response),
            },
        }
    }
}

impl<S, B, A, ResBody> Future for ResponseFuture<S, B, A>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    A: Admit,
{
    type Output = Result<Response<ResponseBody<ResBody, A::Held>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Checking {
                    answer,
                    pending,
                    inner,
                    request,
                    core,
                    span,
                } => {
                    let entered = span.enter();
                    let result = ready!(answer.poll(cx));
                    let (Some(pending), Some(mut inner), Some(mut request)) =
                        (pending.take(), inner.take(), request.take())
                    else {
                        unreachable!("the checking state is left as soon as the store answers")
                    };
                    let next = core.settle(result, pending, &mut request);
                    drop(entered);
                    state.set(State::after(next, request, &mut inner));
                }
                StateProj::Waiting {
                    sleep,
                    inner,
                    request,
                    stamp,
                    held,
                } => {
                    ready!(sleep.as_mut().poll(cx));
                    let (Some(mut inner), Some(request)) = (inner.take(), request.take()) else {
                        unreachable!("the waiting state is left as soon as its timer fires")
                    };
                    let (stamp, held) = (stamp.take(), held.take());
                    state.set(State::Calling {
                        future: inner.call(request),
                        stamp,
                        held,
                    });
                }
                StateProj::Calling {
                    future,
                    stamp,
                    held,
                } => {
                    // An error drops what the request held with this future.
                    let mut response = ready!(future.poll(cx))?;
                    if let Some(stamp) = stamp.take() {
                        stamp.apply(response.headers_mut());
                    }
                    let held = held.take();
                    return Poll::Ready(Ok(response.map(|body| ResponseBody::inner(body, held))));
                }
                StateProj::Rejected { response } => {
                    let response = response
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(response.map(ResponseBody::rejection)));
                }
            }
        }
    }
}

impl<S, B, A> fmt::Debug for ResponseFuture<S, B, A>
where
    S: Service<Request<B>>,
    A: Admit,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Checking { .. } => "checking",
            State::Waiting { .. } => "waiting",
            State::Calling { .. } => "calling",
            State::Rejected { .. } => "rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
