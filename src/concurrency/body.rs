//! [`ConcurrencyBody`]: a response body that holds its request's slot until it is finished.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::ConcurrencyPermit;
use crate::ResponseBody;

pin_project! {
    /// The body of a [`ConcurrencyLimit`](super::ConcurrencyLimit) response. It holds the
    /// request's [`ConcurrencyPermit`] until its last frame has been read (or an error ended it),
    /// or until it is dropped: a streamed response keeps its slot while it streams.
    pub struct ConcurrencyBody<B> {
        #[pin]
        inner: ResponseBody<B>,
        permit: Option<ConcurrencyPermit>,
    }
}

impl<B> ConcurrencyBody<B> {
    pub(crate) fn new(inner: ResponseBody<B>, permit: Option<ConcurrencyPermit>) -> Self {
        Self { inner, permit }
    }
}

impl<B: Body<Data = Bytes>> Body for ConcurrencyBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let frame = this.inner.poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) {
            // Finished: give the slot back now, not whenever the server drops the body.
            this.permit.take();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> std::fmt::Debug for ConcurrencyBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrencyBody")
            .field("inner", &self.inner)
            .field("permit", &self.permit)
            .finish()
    }
}
