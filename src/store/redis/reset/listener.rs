//! [`Listener`]: the one task per store that hears resets, and subscribes again when its
//! connection breaks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSub;
use tokio::sync::Notify;

use super::message::Reset;
use super::{forget, forget_everything};
use crate::store::redis::Inner;
use crate::store::redis::connect::connection::backoff_delay;
use crate::store::redis::connect::subscribe::{Subscribe, within};

/// How a store hears resets: its pub/sub connection's maker, the channel, and the task's state.
pub(in crate::store::redis) struct Listener {
    subscribe: Subscribe,
    channel: String,
    /// Whether the task runs. The task clears it when it ends (its runtime shut down), so that
    /// the next decision, on whatever runtime then runs the store, starts another.
    running: AtomicBool,
    /// A connection that leaves a PING this long unanswered (a frozen server, a partition) is
    /// replaced; the PING is sent after as long without a message.
    stale_after: Duration,
    /// The wait after a failed subscription: the store's reconnect backoff.
    backoff: (Duration, Duration),
    /// Set once the first subscription has been tried (heard or failed), with `tried` notified.
    first_tried: AtomicBool,
    tried: Notify,
}

/// Why a subscription ended.
enum Ended {
    /// The store was dropped: the task ends.
    StoreGone,
    /// The connection broke or went silent: subscribe again.
    Lost(&'static str),
}

impl Listener {
    pub(in crate::store::redis) fn new(
        subscribe: Subscribe,
        channel: String,
        stale_after: Duration,
        backoff: (Duration, Duration),
    ) -> Self {
        Self {
            subscribe,
            channel,
            running: AtomicBool::new(false),
            stale_after,
            backoff,
            first_tried: AtomicBool::new(false),
            tried: Notify::new(),
        }
    }

    /// Waits until the first subscription has been tried, for at most `stale_after`; at once
    /// after that. A call asked once the listener is subscribed can miss no reset (a reset
    /// published later is heard; one published before is in the state the call reads), so what
    /// it teaches is kept. Asked earlier, its answer might predate a reset the listener was not
    /// yet there to hear, and is forgotten when the listener subscribes. So the store's first
    /// calls wait for the subscription (a round trip at start, in parallel with their own
    /// connection's), and a denial learned then is remembered for its whole wait. A listener
    /// that is not running (its store was asked outside a Tokio runtime, where it cannot start)
    /// is not waited for: nothing would end the wait.
    #[inline]
    pub(in crate::store::redis) async fn first_tried(&self) {
        if self.first_tried.load(Ordering::Acquire) || !self.running.load(Ordering::Acquire) {
            return;
        }
        self.wait_for_first(self.stale_after).await;
    }

    #[cold]
    async fn wait_for_first(&self, at_most: Duration) {
        let mut tried = std::pin::pin!(self.tried.notified());
        // Registered before the flag is read again: a notification in between is not lost.
        tried.as_mut().enable();
        if self.first_tried.load(Ordering::Acquire) {
            return;
        }
        let _ = tokio::time::timeout(at_most, tried).await;
    }

    /// Marks the first subscription as tried, and lets the calls waiting for it go.
    fn tried_once(&self) {
        if !self.first_tried.swap(true, Ordering::AcqRel) {
            self.tried.notify_waiters();
        }
    }

    /// Starts the listener of `inner`'s store unless it runs, or the store has none (it
    /// remembers nothing). Outside a Tokio runtime it does nothing: the next call tries again.
    #[inline]
    pub(in crate::store::redis) fn ensure(inner: &Arc<Inner>) {
        if let Some(listener) = &inner.listener
            && !listener.running.load(Ordering::Relaxed)
        {
            start(inner, listener);
        }
    }
}

#[cold]
fn start(inner: &Arc<Inner>, listener: &Listener) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if listener.running.swap(true, Ordering::AcqRel) {
        return;
    }
    // Made before the task's future and moved into it: a runtime that shuts down before ever
    // polling the task drops it, and with it the claim.
    let running = Running(Arc::downgrade(inner));
    drop(runtime.spawn(listen(running)));
}

/// The task: subscribe, forget everything remembered (a reset may have been missed before),
/// hear resets until the connection fails, then again after a backoff; until the store is
/// dropped.
async fn listen(running: Running) {
    let store = running.0.clone();
    let mut failures = 0_u64;
    loop {
        let (subscribing, channel, stale_after, backoff) = {
            let Some(inner) = store.upgrade() else {
                return;
            };
            let listener = inner.listener.as_ref().expect("a store that listens");
            (
                (listener.subscribe)(),
                listener.channel.clone(),
                listener.stale_after,
                listener.backoff,
            )
        };
        let subscribed = async {
            let mut pubsub = subscribing.await?;
            within(stale_after, pubsub.subscribe(&channel)).await?;
            Ok::<_, redis::RedisError>(pubsub)
        }
        .await;
        {
            let Some(inner) = store.upgrade() else {
                return;
            };
            if subscribed.is_ok() {
                // Only what calls asked before now taught can have missed a reset: on the first
                // subscription that is nothing, unless a call gave up waiting for it.
                forget_everything(&inner);
            }
            if let Some(listener) = &inner.listener {
                listener.tried_once();
            }
        }
        match subscribed {
            Ok(pubsub) => {
                if failures > 0 {
                    tracing::info!("hearing resets again; what was remembered before is forgotten");
                }
                failures = 0;
                match hear(pubsub, &store, stale_after).await {
                    Ended::StoreGone => return,
                    Ended::Lost(why) => {
                        tracing::warn!(
                            "stopped hearing resets ({why}); subscribing again, then forgetting \
                             what was remembered"
                        );
                    }
                }
            }
            Err(err) => {
                let wait = backoff_delay(failures, backoff);
                // Once per outage at warn: the decisions' connection reports its own failures.
                if failures == 0 {
                    tracing::warn!(error = %err, retry_in = ?wait, "cannot subscribe to resets");
                } else {
                    tracing::debug!(error = %err, retry_in = ?wait, "cannot subscribe to resets");
                }
                failures += 1;
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Hears resets on `pubsub` and forgets what each covers, until the connection fails or the
/// store is dropped.
async fn hear(pubsub: PubSub, store: &Weak<Inner>, stale_after: Duration) -> Ended {
    let (mut sink, mut messages) = pubsub.split();
    loop {
        match tokio::time::timeout(stale_after, messages.next()).await {
            Ok(Some(message)) => {
                let Some(inner) = store.upgrade() else {
                    return Ended::StoreGone;
                };
                if let Some(reset) = Reset::decode(message.get_payload_bytes()) {
                    forget(&inner, &reset);
                }
            }
            Ok(None) => return Ended::Lost("the connection closed"),
            // Silent for a while: is it alive?
            Err(_) => {
                if store.strong_count() == 0 {
                    return Ended::StoreGone;
                }
                if within(stale_after, sink.ping::<redis::Value>())
                    .await
                    .is_err()
                {
                    return Ended::Lost("no answer to a PING");
                }
            }
        }
    }
}

/// Marks the listener as stopped when its task ends or is dropped.
struct Running(Weak<Inner>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(listener) = self
            .0
            .upgrade()
            .as_ref()
            .and_then(|inner| inner.listener.as_ref())
        {
            listener.running.store(false, Ordering::Release);
        }
    }
}
