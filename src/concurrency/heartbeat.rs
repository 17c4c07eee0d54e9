//! The heartbeat: one background task per store that keeps this process's permits alive.
//!
//! A permit is a lease that expires unless renewed (seed 000's "keys that expire unless a
//! background task keeps refreshing them"). Every store keeps a [`Heartbeat`]: the permits this
//! process holds through it. Its task renews them all, in batches, every renewal period, so a long
//! request keeps its slot while a crashed or partitioned server loses its own within a lease.
//! The period is the shortest any held permit asked for, and a permit asking for a shorter one
//! wakes the task at once: it may be asleep for a longer period, and the new lease would end
//! before it woke.
//!
//! The task holds the store only weakly (it ends when the store is dropped), ends with the Tokio
//! runtime, and survives store outages: a failed renewal is logged and tried again next tick.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::{Either, select};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use super::{Lease, PermitId, Renewal, Slot};
use crate::clock::micros;
use crate::log::Throttled;
use crate::store::StoreFuture;

/// Renewals per store call: bounds the size of one script call or one lock hold.
const BATCH: usize = 512;

/// How often an idle heartbeat checks whether its store is still there.
const IDLE: Duration = Duration::from_secs(1);

/// A store that leases permits and renews them: what the heartbeat task drives.
pub(crate) trait Renews: Send + Sync + 'static {
    /// The store's record of live permits.
    fn heartbeat(&self) -> &Heartbeat;

    /// Renews a batch of permits, answering the ones that were gone, which it stops renewing
    /// (see [`Heartbeat::forget_gone`]).
    fn renew(self: &Arc<Self>, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>>;
}

/// The permits this process holds through one store, and its renewal task's bookkeeping.
pub(crate) struct Heartbeat {
    held: Mutex<HashMap<PermitId, (Slot, Duration), foldhash::fast::RandomState>>,
    /// The shortest renewal period asked for so far, in µs (`u64::MAX` before any).
    every_us: AtomicU64,
    /// Wakes the task when the period shrinks.
    shortened: Arc<Notify>,
    started: AtomicBool,
    failures: Throttled,
    losses: Throttled,
}

impl Heartbeat {
    pub(crate) fn new() -> Self {
        Self {
            held: Mutex::default(),
            every_us: AtomicU64::new(u64::MAX),
            shortened: Arc::new(Notify::new()),
            started: AtomicBool::new(false),
            failures: Throttled::new(Duration::from_secs(10)),
            losses: Throttled::new(Duration::from_secs(10)),
        }
    }

    /// Starts renewing `permit` every `lease.renew_every()`, starting the task if needed.
    pub(crate) fn hold<R: Renews>(owner: &Arc<R>, slot: Slot, permit: PermitId, lease: Lease) {
        let heartbeat = owner.heartbeat();
        let every = micros(lease.renew_every()).max(1);
        let before = heartbeat.every_us.fetch_min(every, Ordering::Relaxed);
        heartbeat.lock().insert(permit, (slot, lease.duration()));
        if every < before {
            // The task may be asleep for the longer period: this lease could end before it
            // wakes. A stored permit wakes it even if it is not waiting yet.
            heartbeat.shortened.notify_one();
        }
        if !heartbeat.started.load(Ordering::Relaxed)
            && !heartbeat.started.swap(true, Ordering::AcqRel)
        {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(run(Arc::downgrade(owner)))),
                // No runtime here: the next permit taken inside one starts the task.
                Err(_) => heartbeat.started.store(false, Ordering::Release),
            }
        }
    }

    /// Stops renewing `permit` (released, or given up).
    pub(crate) fn forget(&self, permit: PermitId) {
        self.lock().remove(&permit);
    }

    /// How many permits are being renewed.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn period(&self) -> Duration {
        match self.every_us.load(Ordering::Relaxed) {
            u64::MAX => IDLE,
            every => Duration::from_micros(every),
        }
    }

    fn renewals(&self) -> Vec<Renewal> {
        self.lock()
            .iter()
            .map(|(&permit, (slot, lease))| Renewal {
                slot: slot.clone(),
                permit,
                lease: *lease,
            })
            .collect()
    }

    /// The store no longer holds these permits: released meanwhile, or their leases expired
    /// before a renewal reached the store (a partition longer than the lease). Renewing them again
    /// would exceed the limit, so they are dropped; their requests run on without a slot. Answers
    /// how many were still held here (lost, rather than released).
    pub(crate) fn forget_gone(&self, gone: &[PermitId]) -> usize {
        if gone.is_empty() {
            return 0;
        }
        let mut held = self.lock();
        gone.iter()
            .filter(|permit| held.remove(permit).is_some())
            .count()
    }

    fn report_lost(&self, lost: usize) {
        if lost > 0 {
            self.losses.warn(|suppressed| {
                tracing::warn!(
                    lost,
                    suppressed,
                    "concurrency permits expired before they could be renewed; their slots were \
                     given back (was the store unreachable for longer than the lease?)"
                );
            });
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<PermitId, (Slot, Duration), foldhash::fast::RandomState>>
    {
        // Every update completes before unlocking: a poisoned map is still consistent.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Marks the heartbeat stopped when its task ends, however it ends (the store dropped, or the
/// runtime shut down with the task in it), so the next permit taken on a live runtime starts a
/// new one.
struct Stopped<R: Renews>(Weak<R>);

impl<R: Renews> Drop for Stopped<R> {
    fn drop(&mut self) {
        if let Some(owner) = self.0.upgrade() {
            owner.heartbeat().started.store(false, Ordering::Release);
        }
    }
}

/// Renews every held permit each period until the store is dropped.
async fn run<R: Renews>(owner: Weak<R>) {
    let _stopped = Stopped(owner.clone());
    let Some(shortened) = owner
        .upgrade()
        .map(|owner| owner.heartbeat().shortened.clone())
    else {
        return;
    };
    let mut last = Instant::now();
    loop {
        // Sleep for a period; a shorter period asked for meanwhile wakes the task to sleep for
        // that one instead. The store is not held while asleep.
        let period = loop {
            let shorter = shortened.notified();
            let Some(period) = owner.upgrade().map(|owner| owner.heartbeat().period()) else {
                return;
            };
            match select(pin!(sleep_until(last + period)), pin!(shorter)).await {
                Either::Left(_) => break period,
                Either::Right(_) => continue,
            }
        };
        let Some(owner) = owner.upgrade() else { return };
        let heartbeat = owner.heartbeat();
        let renewals = heartbeat.renewals();
        for batch in renewals.chunks(BATCH) {
            // A renewal slower than a period is as good as failed: the next tick sends a new one.
            match tokio::time::timeout(period, owner.renew(batch)).await {
                Ok(Ok(gone)) => heartbeat.report_lost(gone.len()),
                failed => {
                    let error = match failed {
                        Ok(Err(err)) => err.to_string(),
                        _ => format!("no answer within {period:?}"),
                    };
                    heartbeat.failures.warn(|suppressed| {
                        tracing::warn!(
                            %error,
                            suppressed,
                            permits = renewals.len(),
                            "could not renew concurrency permits; trying again next period"
                        );
                    });
                    break;
                }
            }
        }
        last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store whose renewals the test scripts, on Tokio's paused clock.
    struct Fake {
        heartbeat: Heartbeat,
        /// How long a renewal call takes to answer.
        latency: Duration,
        /// When each call was made.
        calls: Mutex<Vec<Instant>>,
    }

    impl Fake {
        fn new(latency: Duration) -> Self {
            Self {
                heartbeat: Heartbeat::new(),
                latency,
                calls: Mutex::default(),
            }
        }

        /// Since `start`, when each call was made.
        fn call_times(&self, start: Instant) -> Vec<Duration> {
            let calls = self.calls.lock().unwrap();
            calls.iter().map(|at| *at - start).collect()
        }
    }

    impl Renews for Fake {
        fn heartbeat(&self) -> &Heartbeat {
            &self.heartbeat
        }

        fn renew(self: &Arc<Self>, _: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
            self.calls.lock().unwrap().push(Instant::now());
            let latency = self.latency;
            StoreFuture::new(async move {
                tokio::time::sleep(latency).await;
                Ok(Vec::new())
            })
        }
    }

    fn hold(store: &Arc<Fake>, lease: Lease) -> PermitId {
        let permit = PermitId::next();
        Heartbeat::hold(store, Slot::new("t", "k").unwrap(), permit, lease);
        permit
    }

    const SECOND: Duration = Duration::from_secs(1);
    /// Renewed every second.
    const THREE_SECONDS: Lease = Lease::new(Duration::from_secs(3));

    /// A fleet shedder's 30 s lease, then a per-user limit's 3 s one on the same store: the task,
    /// asleep until its 10 s round, wakes up for the shorter period.
    #[tokio::test(start_paused = true)]
    async fn a_shorter_period_wakes_the_sleeping_task() {
        let store = Arc::new(Fake::new(Duration::ZERO));
        let start = Instant::now();
        hold(&store, Lease::new(30 * SECOND));
        tokio::time::sleep(SECOND / 2).await;
        hold(&store, THREE_SECONDS);
        tokio::time::sleep(3 * SECOND).await;
        assert_eq!(store.call_times(start), [SECOND, 2 * SECOND, 3 * SECOND]);
    }
}
