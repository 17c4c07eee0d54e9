//! The timers of a client connection: a request head must arrive within the header timeout, an
//! idle keep-alive connection is closed after the idle timeout. hyper's own header timer starts
//! as soon as the connection waits for a head, idle or not, so one timer cannot be both:
//! [`Timed`] tells the two apart by the requests in flight ([`InFlight`]) and the bytes read.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

/// One client connection's state shared by its I/O, its requests and its tunnel: the requests
/// that have not ended (from their head read until their response's body has been sent, or,
/// for an upgrade, until the tunnel closes), and its slot among the connections allowed, given
/// back when the connection and its tunnel are both gone.
#[derive(Debug)]
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    /// The connection's task, woken when its last request ends: hyper does not read from an
    /// idle connection until bytes come, so the idle timer must be started from outside.
    connection: AtomicWaker,
    _slot: OwnedSemaphorePermit,
    /// Whether it counts in `gateway_connections_open`.
    counted: bool,
}

impl Activity {
    pub(crate) fn new(slot: OwnedSemaphorePermit, counted: bool) -> Self {
        if counted {
            metrics::gauge!("gateway_connections_open").increment(1.0);
        }
        Self {
            in_flight: AtomicUsize::new(0),
            connection: AtomicWaker::new(),
            _slot: slot,
            counted,
        }
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        if self.counted {
            metrics::gauge!("gateway_connections_open").decrement(1.0);
        }
    }
}

/// One request of a connection in flight, until dropped.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl InFlight {
    pub(crate) fn new(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(activity))
    }
}

impl Clone for InFlight {
    fn clone(&self) -> Self {
        Self::new(&self.0)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.connection.wake();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request's first byte: the idle timeout runs.
    Idle,
    /// Reading a head (or a new connection's first one): the header timeout runs.
    Head,
    /// A request in flight: no timer (the upstream's and the client's own bounds apply).
    Busy,
}

/// A client connection's I/O, closed (a `TimedOut` error on read) when a timer runs out.
#[derive(Debug)]
pub(crate) struct Timed<IO> {
    io: IO,
    activity: Arc<Activity>,
    phase: Phase,
    /// When the running timer ends.
    deadline: Instant,
    /// Registered for `deadline` or earlier: moved only when it fires early or must fire
    /// sooner, so that most requests cost no timer operation.
    sleep: Pin<Box<Sleep>>,
    header_timeout: Duration,
    idle_timeout: Duration,
}

impl<IO> Timed<IO> {
    /// A new connection: its first head must arrive within `header_timeout`.
    pub(crate) fn new(
        io: IO,
        activity: Arc<Activity>,
        header_timeout: Duration,
        idle_timeout: Duration,
    ) -> Self {
        let deadline = Instant::now() + header_timeout;
        Self {
            io,
            activity,
            phase: Phase::Head,
            deadline,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            header_timeout,
            idle_timeout,
        }
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if deadline < self.sleep.deadline() {
            self.sleep.as_mut().reset(deadline);
        }
    }

    /// Whether the running timer has run out (registering for a wake-up if not).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return false;
            }
            if Instant::now() >= self.deadline {
                return true;
            }
            // Fired for an earlier deadline that has since moved on.
            let deadline = self.deadline;
            self.sleep.as_mut().reset(deadline);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Timed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.phase != Phase::Busy {
            // Registered before the check below, so that a request ending after it wakes us.
            this.activity.connection.register(cx.waker());
        }
        if this.activity.in_flight.load(Ordering::Acquire) > 0 {
            this.phase = Phase::Busy;
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        if this.phase == Phase::Busy {
            // The last request has ended: the connection is idle until a byte comes.
            this.phase = Phase::Idle;
            this.set_deadline(Instant::now() + this.idle_timeout);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.phase == Phase::Idle && buf.filled().len() > before {
                    this.phase = Phase::Head;
                    this.set_deadline(Instant::now() + this.header_timeout);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => {
                if this.expired(cx) {
                    let what = match this.phase {
                        Phase::Idle => "the idle timeout",
                        _ => "the header timeout",
                    };
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("closed by {what}"),
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Timed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.io).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request [`InFlight`] until it has been sent (or dropped).
    pub struct Tracked<B> {
        #[pin]
        body: B,
        in_flight: InFlight,
    }
}

impl<B> Tracked<B> {
    pub(crate) fn new(body: B, in_flight: InFlight) -> Self {
        Self { body, in_flight }
    }
}

impl<B: http_body::Body> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
