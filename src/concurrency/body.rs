//! [`ConcurrencyBody`]: a response body that holds its request's slot until it is finished.

use super::ConcurrencyPermit;
use crate::{HeldBody, ResponseBody};

/// The body of a [`ConcurrencyLimit`](super::ConcurrencyLimit) response. It holds the request's
/// [`ConcurrencyPermit`] until its last frame has been read (the frame after which the body
/// reports its end, or the end itself), until an error ends it, or until it is dropped: a streamed
/// response keeps its slot while it streams.
pub type ConcurrencyBody<B> = HeldBody<ResponseBody<B>, ConcurrencyPermit>;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use http_body_util::{BodyExt, Full, StreamBody};

    use bytes::Bytes;
    use http_body::{Body, Frame};

    use super::*;
    use crate::concurrency::{Lease, PermitId, Slot};
    use crate::store::{MemoryStore, Store};

    async fn permit(store: &MemoryStore, slot: &Slot) -> ConcurrencyPermit {
        let id = PermitId::next();
        let lease = Lease::new(Duration::from_secs(30));
        assert!(
            store
                .acquire(slot, id, 2, lease)
                .await
                .unwrap()
                .is_admitted()
        );
        ConcurrencyPermit::new(Arc::new(store.clone()), slot.clone(), id)
    }

    #[tokio::test]
    async fn the_slot_is_given_back_with_the_last_frame_or_on_drop() {
        let store = MemoryStore::new();
        let slot = Slot::new("ws", "user").unwrap();

        // A full body reports its end as soon as its one frame is out: a server polls no
        // further, so the slot must not wait for a `None` that never comes.
        let full = ResponseBody::inner(Full::new(Bytes::from_static(b"ok")));
        let mut body = ConcurrencyBody::new(full, Some(permit(&store, &slot).await));
        assert_eq!(store.in_flight(&slot), 1);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "ok");
        assert!(body.is_end_stream());
        assert_eq!(store.in_flight(&slot), 0, "given back with the last frame");
        drop(body);
        assert_eq!(store.renewing(), 0);

        // A stream cannot know it has ended until it is polled again.
        let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(Frame::data(
            Bytes::from_static(b"a"),
        ))]);
        let stream = ResponseBody::inner(StreamBody::new(chunks));
        let mut body = ConcurrencyBody::new(stream, Some(permit(&store, &slot).await));
        body.frame().await.unwrap().unwrap();
        assert_eq!(store.in_flight(&slot), 1, "a stream may have more to send");
        assert!(body.frame().await.is_none());
        assert_eq!(store.in_flight(&slot), 0, "given back at the end");

        let chunks = futures_util::stream::pending::<Result<Frame<Bytes>, std::io::Error>>();
        let stream = ResponseBody::inner(StreamBody::new(chunks));
        let body = ConcurrencyBody::new(stream, Some(permit(&store, &slot).await));
        assert_eq!(store.in_flight(&slot), 1);
        drop(body);
        assert_eq!(
            store.in_flight(&slot),
            0,
            "given back when dropped unfinished"
        );
    }
}
