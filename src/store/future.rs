//! [`StoreFuture`]: a store's answer, resolved at once or pending on I/O.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::StoreError;

/// The answer of a [`Store`](super::Store) or a [`PermitStore`](super::permits::PermitStore): resolved at
/// once (an in-process store: no allocation, no timer), or pending on I/O (a boxed future).
#[must_use = "futures do nothing unless polled"]
pub struct StoreFuture<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Ready(Option<Result<T, StoreError>>),
    Pending(Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>),
}

impl<T> StoreFuture<T> {
    /// An answer that is already known (a synchronous store).
    pub fn ready(result: Result<T, StoreError>) -> Self {
        Self {
            inner: Inner::Ready(Some(result)),
        }
    }

    /// An answer that needs I/O.
    pub fn new(future: impl Future<Output = Result<T, StoreError>> + Send + 'static) -> Self {
        Self {
            inner: Inner::Pending(Box::pin(future)),
        }
    }

    /// Takes the answer if it is already known, so callers can skip the asynchronous path; `None`
    /// when it needs polling (or was already taken).
    pub fn take_ready(&mut self) -> Option<Result<T, StoreError>> {
        match &mut self.inner {
            Inner::Ready(result) => result.take(),
            Inner::Pending(_) => None,
        }
    }
}

// The answer is never pinned (only the boxed future is), so the wrapper can move freely.
impl<T> Unpin for StoreFuture<T> {}

impl<T> Future for StoreFuture<T> {
    type Output = Result<T, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().inner {
            Inner::Ready(result) => {
                Poll::Ready(result.take().expect("StoreFuture polled after completion"))
            }
            Inner::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for StoreFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.inner {
            Inner::Ready(_) => "ready",
            Inner::Pending(_) => "pending",
        };
        f.debug_tuple("StoreFuture").field(&state).finish()
    }
}
