//! [`ResponseFuture`]: waiting for the store, then calling the service or answering early.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::ResponseBody;
use crate::deadline::Deadline;
use crate::decision::Decision;
use crate::headers::Stamp;
use crate::layer::{Config, Next};
use crate::store::StoreFuture;

pin_project! {
    /// The response future of [`RateLimit`](crate::RateLimit).
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
        Checking {
            #[pin]
            check: Deadline<StoreFuture<Decision>>,
            inner: Option<S>,
            request: Option<Request<B>>,
            config: Arc<Config>,
            cost: u32,
        },
        // The service is handling the request; its response gets the stamp.
        Calling {
            #[pin]
            future: S::Future,
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
    pub(crate) fn checking(
        check: StoreFuture<Decision>,
        inner: S,
        request: Request<B>,
        config: Arc<Config>,
        cost: u32,
    ) -> Self {
        let check = Deadline::new(check, config.deadline);
        let state = State::Checking {
            check,
            inner: Some(inner),
            request: Some(request),
            config,
            cost,
        };
        Self { state }
    }

    pub(crate) fn next(next: Next<B>, inner: &mut S) -> Self {
        match next {
            Next::Pass(request, stamp) => Self::calling(inner.call(request), Some(stamp)),
            Next::Reject(response) => Self::rejected(response),
        }
    }

    pub(crate) fn unlimited(future: S::Future) -> Self {
        Self::calling(future, None)
    }

    pub(crate) fn rejected(response: Response<Bytes>) -> Self {
        Self {
            state: State::Rejected {
                response: Some(response),
            },
        }
    }

    fn calling(future: S::Future, stamp: Option<Stamp>) -> Self {
        Self {
            state: State::Calling { future, stamp },
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Checking {
                    check,
                    inner,
                    request,
                    config,
                    cost,
                } => {
                    let result = ready!(check.poll(cx));
                    let (Some(mut inner), Some(request)) = (inner.take(), request.take()) else {
                        unreachable!("the checking state is left as soon as the store answers")
                    };
                    let next = match config.decide(result, request, *cost) {
                        Next::Pass(request, stamp) => State::Calling {
                            future: inner.call(request),
                            stamp: Some(stamp),
                        },
                        Next::Reject(response) => State::Rejected {
                            response: Some(response),
                        },
                    };
                    state.set(next);
                }
                StateProj::Calling { future, stamp } => {
                    let mut response = ready!(future.poll(cx))?;
                    if let Some(stamp) = stamp.take() {
                        stamp.apply(response.headers_mut());
                    }
                    return Poll::Ready(Ok(response.map(ResponseBody::inner)));
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

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Checking { .. } => "checking",
            State::Calling { .. } => "calling",
            State::Rejected { .. } => "rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
