//! [`HeldBody`]: a response body that holds something of its request (a concurrency permit, an
//! in-flight count) until the response is finished.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// A response body that holds `T` until its last frame has been read (the frame after which
    /// the body reports its end, or the end itself), until an error ends it, or until it is
    /// dropped: a streamed response keeps what it holds while it streams.
    ///
    /// [`ConcurrencyBody`](crate::concurrency::ConcurrencyBody) holds a request's concurrency
    /// permit, [`InFlightBody`](crate::shed::InFlightBody) its place in the utilisation shedder's
    /// in-flight count.
    pub struct HeldBody<B, T> {
        #[pin]
        body: B,
        held: Option<T>,
    }
}

impl<B, T> HeldBody<B, T> {
    pub(crate) fn new(body: B, held: Option<T>) -> Self {
        Self { body, held }
    }
}

impl<B: Body, T> Body for HeldBody<B, T> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let frame = this.body.as_mut().poll_frame(cx);
        // The server stops polling once the body says it has ended, and may keep the body a
        // while longer (e.g. until the connection's next request), so let go with the last frame
        // or on an error rather than waiting for the drop.
        let done = match &frame {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => this.body.is_end_stream(),
            Poll::Pending => false,
        };
        if done {
            this.held.take();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B, T> fmt::Debug for HeldBody<B, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldBody")
            .field("holding", &self.held.is_some())
            .finish_non_exhaustive()
    }
}
