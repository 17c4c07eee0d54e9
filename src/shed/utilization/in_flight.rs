//! Counting the requests a service is working on: a guard per admitted request, carried by the
//! response future and then by the response body, so the count drops when the body has been sent
//! or dropped, when the client goes away (the future is dropped), and when the handler panics
//! (unwinding drops the future).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::HeldBody;

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

/// One request counted as in flight by a
/// [`UtilizationShedLayer`](crate::shed::UtilizationShedLayer), held by its [`InFlightBody`].
/// Dropping it is the only way to stop counting the request, so no path forgets to.
#[derive(Debug)]
pub struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The body of a response that passed a
/// [`UtilizationShedLayer`](crate::shed::UtilizationShedLayer): the service's own body, which
/// keeps its request counted as in flight until the last frame is out or the body is dropped.
pub type InFlightBody<B> = HeldBody<B, InFlightGuard>;

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    #[tokio::test]
    async fn the_count_drops_on_the_last_frame_or_on_drop() {
        let in_flight = InFlight::default();
        let full = Full::new(Bytes::from_static(b"ok"));
        let mut body = InFlightBody::new(full, Some(in_flight.enter()));
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
        let mut body = InFlightBody::new(StreamBody::new(chunks), Some(in_flight.enter()));
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
