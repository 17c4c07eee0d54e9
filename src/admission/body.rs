//! [`ResponseBody`]: the inner service's body, holding what its request was admitted with until it
//! is finished, or the body of a refusal.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a response of this crate's middleware: the inner service's body, or the body of
    /// a refusal (429, 400, 503).
    ///
    /// The inner service's body holds `H` (what its request was admitted with: a
    /// [`ConcurrencyPermit`](crate::concurrency::ConcurrencyPermit), a place in a load shedder's
    /// in-flight count; nothing for a rate limit) until its last frame has been read (the frame
    /// after which the body reports its end, or the end itself), until an error ends it, or until
    /// it is dropped: a streamed response keeps what it holds while it streams.
    pub struct ResponseBody<B, H = ()> {
        #[pin]
        kind: Kind<B, H>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B, H> {
        Inner { #[pin] body: B, held: Option<H> },
        Rejection { body: Option<Bytes> },
    }
}

impl<B, H> ResponseBody<B, H> {
    pub(crate) fn inner(body: B, held: Option<H>) -> Self {
        Self {
            kind: Kind::Inner { body, held },
        }
    }

    pub(crate) fn rejection(body: Bytes) -> Self {
        Self {
            kind: Kind::Rejection {
                body: (!body.is_empty()).then_some(body),
            },
        }
    }
}

impl<B: Body<Data = Bytes>, H> Body for ResponseBody<B, H> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { mut body, held } => {
                let frame = body.as_mut().poll_frame(cx);
                // The server stops polling once the body says it has ended, and may keep the body
                // a while longer (e.g. until the connection's next request), so let go with the
                // last frame or on an error rather than waiting for the drop.
                let done = match &frame {
                    Poll::Ready(None | Some(Err(_))) => true,
                    Poll::Ready(Some(Ok(_))) => body.is_end_stream(),
                    Poll::Pending => false,
                };
                if done {
                    held.take();
                }
                frame
            }
            KindProj::Rejection { body } => {
                Poll::Ready(body.take().map(|bytes| Ok(Frame::data(bytes))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Rejection { body } => body.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Rejection { body } => {
                SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

impl<B, H> fmt::Debug for ResponseBody<B, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Inner { held, .. } => f
                .debug_struct("ResponseBody")
                .field("holding", &held.is_some())
                .finish_non_exhaustive(),
            Kind::Rejection { .. } => f.debug_tuple("ResponseBody").field(&"rejection").finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    /// Counts itself while it lives.
    struct Held(Arc<AtomicUsize>);

    impl Held {
        fn new(count: &Arc<AtomicUsize>) -> Self {
            count.fetch_add(1, Ordering::Relaxed);
            Held(count.clone())
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn what_a_body_holds_goes_with_the_last_frame_or_on_drop() {
        let count = Arc::new(AtomicUsize::new(0));
        let held = || Some(Held::new(&count));
        let live = || count.load(Ordering::Relaxed);

        // A full body reports its end as soon as its one frame is out: a server polls no
        // further, so the body must not wait for a `None` that never comes.
        let mut body = ResponseBody::inner(Full::new(Bytes::from_static(b"ok")), held());
        assert_eq!(live(), 1);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "ok");
        assert!(body.is_end_stream());
        assert_eq!(live(), 0, "let go with the last frame");
        assert!(body.frame().await.is_none());
        drop(body);
        assert_eq!(live(), 0, "let go once only");

        // A stream cannot know it has ended until it is polled again.
        let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(Frame::data(
            Bytes::from_static(b"a"),
        ))]);
        let mut body = ResponseBody::inner(StreamBody::new(chunks), held());
        body.frame().await.unwrap().unwrap();
        assert_eq!(live(), 1, "a stream may have more to send");
        assert!(body.frame().await.is_none());
        assert_eq!(live(), 0, "let go at the end");

        let chunks = futures_util::stream::pending::<Result<Frame<Bytes>, std::io::Error>>();
        let body = ResponseBody::inner(StreamBody::new(chunks), held());
        assert_eq!(live(), 1);
        drop(body);
        assert_eq!(live(), 0, "let go when dropped unfinished");
    }

    #[tokio::test]
    async fn a_refusal_is_its_bytes_and_an_empty_one_has_ended() {
        let mut body = ResponseBody::<Full<Bytes>, ()>::rejection(Bytes::from_static(b"no"));
        assert_eq!(body.size_hint().exact(), Some(2));
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "no"
        );
        assert!(body.is_end_stream());
        let empty = ResponseBody::<Full<Bytes>, ()>::rejection(Bytes::new());
        assert!(empty.is_end_stream());
    }
}
