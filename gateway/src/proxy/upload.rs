//! [`Upload`]: a request body on its way upstream, which says when it has been sent whole (the
//! upstream timeout starts then, never during an upload) and stops one larger than the maximum.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::sync::Notify;

use crate::runtime::BoxError;

/// What the proxy learns about an upload while it is sent.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    sent: Notify,
    too_large: AtomicBool,
}

impl Progress {
    /// Resolves once the body has been sent whole (or has failed).
    pub(crate) async fn sent(&self) {
        self.sent.notified().await;
    }

    /// Whether the body was stopped for passing the maximum size.
    pub(crate) fn too_large(&self) -> bool {
        self.too_large.load(Ordering::Relaxed)
    }
}

pin_project_lite::pin_project! {
    /// A request body, watched.
    pub(crate) struct Upload {
        #[pin]
        body: Body,
        progress: Arc<Progress>,
        // Bytes it may still carry.
        left: u64,
        done: bool,
    }
}

impl Upload {
    /// `body`, at most `max` bytes long; and its [`Progress`].
    pub(crate) fn new(body: Body, max: u64) -> (Upload, Arc<Progress>) {
        let progress = Arc::new(Progress::default());
        let upload = Upload {
            body,
            progress: Arc::clone(&progress),
            left: max,
            done: false,
        };
        (upload, progress)
    }
}

impl http_body::Body for Upload {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        let frame = match this.body.as_mut().poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(frame) => frame,
        };
        let finish = |done: &mut bool| {
            *done = true;
            // `notify_one` keeps the wake-up for a waiter that comes later.
            this.progress.sent.notify_one();
        };
        match frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let length = data.len() as u64;
                    if length > *this.left {
                        this.progress.too_large.store(true, Ordering::Relaxed);
                        finish(this.done);
                        return Poll::Ready(Some(Err("the request body is too large".into())));
                    }
                    *this.left -= length;
                }
                if this.body.is_end_stream() {
                    finish(this.done);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(err)) => {
                finish(this.done);
                Poll::Ready(Some(Err(err.into())))
            }
            None => {
                finish(this.done);
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
