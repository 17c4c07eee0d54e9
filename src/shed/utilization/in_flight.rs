//! Counting the requests a service is working on: a guard per admitted request, carried by the
//! response future and then by the response body, so the count drops when the body has been sent
//! or dropped, when the client goes away (the future is dropped), and when the handler panics
//! (unwinding drops the future).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// The number of requests in flight, shared by every service of one layer.
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// How many requests are in flight now.
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one more request until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self.0.clone())
    }
}

/// One request in flight. Dropping it is the only way to stop counting it, so no path forgets to.
#[derive(Debug)]
pub(crate) struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pin_project! {
    /// The body of a response that passed a
    /// [`UtilizationShedLayer`](crate::shed::UtilizationShedLayer): the service's own body, which
    /// keeps its request counted as in flight until the last frame is out or the body is dropped.
    pub struct InFlightBody<B> {
        #[pin]
        body: B,
        guard: Option<InFlightGuard>,
    }
}

impl<B> InFlightBody<B> {
    pub(crate) fn new(body: B, guard: InFlightGuard) -> Self {
        Self {
            body,
            guard: Some(guard),
        }
    }
}

impl<B: Body> Body for InFlightBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let frame = this.body.as_mut().poll_frame(cx);
        // The server stops polling once the body says it has ended, and may keep the body a
        // while longer (e.g. until the connection's next request), so release on the last frame
        // or on an error rather than waiting for the drop.
        let done = match &frame {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => this.body.is_end_stream(),
            Poll::Pending => false,
        };
        if done {
            this.guard.take();
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

impl<B> std::fmt::Debug for InFlightBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlightBody")
            .field("in_flight", &self.guard.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    #[tokio::test]
    async fn the_count_drops_on_the_last_frame_or_on_drop() {
        let in_flight = InFlight::default();
        let mut body = InFlightBody::new(Full::new(Bytes::from_static(b"ok")), in_flight.enter());
        assert_eq!(in_flight.count(), 1);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "ok");
        assert_eq!(in_flight.count(), 0, "released with the last frame");
        assert!(body.frame().await.is_none());
        drop(body);
        assert_eq!(in_flight.count(), 0, "released once only");

        let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(Frame::data(
            Bytes::from_static(b"a"),
        ))]);
        let mut body = InFlightBody::new(StreamBody::new(chunks), in_flight.enter());
        body.frame().await.unwrap().unwrap();
        assert_eq!(in_flight.count(), 1, "a stream may have more to send");
        drop(body);
        assert_eq!(
            in_flight.count(),
            0,
            "released when the body is dropped unfinished"
        );
    }
}
