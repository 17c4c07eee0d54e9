//! The heartbeat: one background task per store that keeps this process's permits alive.
//!
//! A permit expires unless renewed ("keys that expire unless a
//! background task keeps refreshing them"). Every store keeps a [`Heartbeat`]: the permits this
//! process holds through it. Its task renews them all, in batches, every renewal period, so a long
//! request keeps its slot while a crashed or partitioned server loses its own within a TTL.
//!
//! The schedule is what keeps permits alive, so it is strict:
//! - rounds start a period apart, however long each takes (a period counted from the end of the
//!   previous round would add the round's duration to every gap);
//! - the period is the shortest any held permit asked for, and a permit asking for a shorter one
//!   wakes the task at once (it may be asleep for a longer period, and the new TTL would end
//!   before it woke);
//! - every batch of a round is sent at once and the round has one deadline, so a slow or failing
//!   batch neither delays nor starves the others.
//!
//! The task holds the store only weakly (it ends when the store is dropped), ends with the Tokio
//! runtime, and survives store outages: a failed renewal is logged and tried again next round.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until, timeout};

use super::{PermitId, PermitTtl, Renewal, Slot};
use crate::clock::micros;
use crate::log::Throttled;
use crate::store::StoreError;
use crate::store::StoreFuture;
use crate::sync::lock;

/// Renewals per store call: bounds the size of one script call or one lock hold.
const BATCH: usize = 512;

/// How often an idle heartbeat checks whether its store is still there.
const IDLE: Duration = Duration::from_secs(1);

/// The least time a round is given, however short the renewal period: a round trip to a busy
/// store over a real network takes milliseconds, and a round that can never finish renews nothing.
const MIN_ROUND: Duration = Duration::from_millis(100);

/// A store that holds permits and renews them: what the heartbeat task drives.
pub(crate) trait Renews: Send + Sync + 'static {
    /// The store's record of live permits.
    fn heartbeat(&self) -> &Heartbeat;

    /// Renews a batch of permits, answering the ones that were gone, which it stops renewing
    /// (see [`Heartbeat::forget_gone`]). A store that renews in several calls (one per slot)
    /// reports the gone permits of the calls that succeeded even when others failed, and then
    /// answers the first error.
    fn renew(self: &Arc<Self>, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>>;
}

/// The permits this process holds through one store, and its renewal task's bookkeeping.
pub(crate) struct Heartbeat {
    held: Mutex<HashMap<PermitId, (Slot, Duration), foldhash::fast::RandomState>>,
    /// The shortest renewal period asked for so far, in µs (`u64::MAX` before any).
    every_us: AtomicU64,
    /// The shortest TTL held so far, in µs (`u64::MAX` before any): bounds a round's deadline.
    ttl_us: AtomicU64,
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
            ttl_us: AtomicU64::new(u64::MAX),
            shortened: Arc::new(Notify::new()),
            started: AtomicBool::new(false),
            failures: Throttled::new(Duration::from_secs(10)),
            losses: Throttled::new(Duration::from_secs(10)),
        }
    }

    /// Starts renewing `permit` every `ttl.renew_every()`, starting the task if needed.
    pub(crate) fn hold<R: Renews>(owner: &Arc<R>, slot: Slot, permit: PermitId, ttl: PermitTtl) {
        let heartbeat = owner.heartbeat();
        let every = micros(ttl.renew_every()).max(1);
        let before = heartbeat.every_us.fetch_min(every, Ordering::Relaxed);
        heartbeat
            .ttl_us
            .fetch_min(micros(ttl.duration()).max(1), Ordering::Relaxed);
        heartbeat.lock().insert(permit, (slot, ttl.duration()));
        if every < before {
            // The task may be asleep for the longer period: this TTL could end before it
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

    /// How long a round may take: a period (the next round is due then), but at least
    /// [`MIN_ROUND`], and at most the shortest TTL minus a period, since a renewal landing
    /// later finds the permits renewed by the previous round already ended.
    fn round_deadline(&self) -> Duration {
        let period = self.period();
        let ttl = Duration::from_micros(self.ttl_us.load(Ordering::Relaxed));
        period
            .max(MIN_ROUND)
            .min(ttl.saturating_sub(period))
            .max(Duration::from_millis(1))
    }

    fn renewals(&self) -> Vec<Renewal> {
        self.lock()
            .iter()
            .map(|(&permit, (slot, ttl))| Renewal {
                slot: slot.clone(),
                permit,
                ttl: *ttl,
            })
            .collect()
    }

    /// The store no longer holds these permits: released meanwhile, or expired
    /// before a renewal reached the store (a partition longer than the TTL). Renewing them again
    /// would exceed the limit, so they are dropped; their requests run on without a slot.
    ///
    /// Only the ones still held here were lost: a permit released between a round's snapshot
    /// and the store's answer is gone because it was given back, which is no news, and on a busy
    /// server happens every round. Answers how many were lost, and warns about them.
    pub(crate) fn forget_gone(&self, gone: &[PermitId]) -> usize {
        if gone.is_empty() {
            return 0;
        }
        let lost = {
            let mut held = self.lock();
            gone.iter()
                .filter(|permit| held.remove(permit).is_some())
                .count()
        };
        if lost > 0 {
            self.losses.warn(|suppressed| {
                tracing::warn!(
                    lost,
                    suppressed,
                    "concurrency permits expired before they could be renewed; their slots were \
                     given back (was the store unreachable for longer than the ttl?)"
                );
            });
        }
        lost
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<PermitId, (Slot, Duration), foldhash::fast::RandomState>>
    {
        lock(&self.held)
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
    // The first round is due a period after the first permit was taken (which started the task).
    let mut last = Instant::now();
    loop {
        // Sleep until a period after the last round began; a shorter period asked for meanwhile
        // wakes the task to sleep for that one instead. The store is not held while asleep.
        loop {
            let shorter = shortened.notified();
            let Some(due) = owner
                .upgrade()
                .map(|owner| last + owner.heartbeat().period())
            else {
                return;
            };
            match select(pin!(sleep_until(due)), pin!(shorter)).await {
                Either::Left(_) => break,
                Either::Right(_) => continue,
            }
        }
        // Fixed cadence, measured from when the round began. A round that started late (the
        // runtime was stalled) shifts the schedule rather than running twice in a row.
        last = Instant::now();
        let Some(owner) = owner.upgrade() else { return };
        round(&owner).await;
    }
}

/// One renewal of every held permit: all batches at once, under one deadline.
async fn round<R: Renews>(owner: &Arc<R>) {
    let heartbeat = owner.heartbeat();
    let renewals = heartbeat.renewals();
    if renewals.is_empty() {
        return;
    }
    let deadline = heartbeat.round_deadline();
    let mut pending: FuturesUnordered<_> = renewals
        .chunks(BATCH)
        .map(|batch| owner.renew(batch))
        .collect();
    let batches = pending.len();
    let (mut failed, mut error) = (0, None);
    let answered = timeout(deadline, async {
        // Each batch forgot its own gone permits (and warned of the lost ones); an error only
        // means its permits wait for the next round.
        while let Some(result) = pending.next().await {
            if let Err(err) = result {
                failed += 1;
                error.get_or_insert(err);
            }
        }
    })
    .await;
    if answered.is_err() {
        // A batch still on its way is as good as failed: the next round sends it again.
        failed += pending.len();
        error.get_or_insert(StoreError::timeout(deadline));
    }
    if let Some(error) = error {
        heartbeat.failures.warn(|suppressed| {
            tracing::warn!(
                %error,
                suppressed,
                failed_batches = failed,
                batches,
                permits = renewals.len(),
                "could not renew every concurrency permit; trying again next period"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    /// A store whose renewals the test scripts, on Tokio's paused clock.
    struct Fake {
        heartbeat: Heartbeat,
        /// How long a renewal call takes to answer.
        latency: Duration,
        /// Whether the first call of every round fails.
        fail_first: bool,
        /// What a renewal reports gone, and which of those are released while it is on its way.
        gone: Vec<PermitId>,
        released: Vec<PermitId>,
        /// When each call was made, and whether it answered without error.
        calls: Mutex<Vec<(Instant, bool)>>,
        answered: AtomicU64,
        /// What `forget_gone` counted as lost.
        lost: AtomicU64,
    }

    impl Fake {
        fn new(latency: Duration) -> Self {
            Self {
                heartbeat: Heartbeat::new(),
                latency,
                fail_first: false,
                gone: Vec::new(),
                released: Vec::new(),
                calls: Mutex::default(),
                answered: AtomicU64::new(0),
                lost: AtomicU64::new(0),
            }
        }

        /// Since `start`, when each call was made.
        fn call_times(&self, start: Instant) -> Vec<Duration> {
            let calls = self.calls.lock().unwrap();
            calls.iter().map(|(at, _)| *at - start).collect()
        }
    }

    impl Renews for Fake {
        fn heartbeat(&self) -> &Heartbeat {
            &self.heartbeat
        }

        fn renew(self: &Arc<Self>, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
            let now = Instant::now();
            let fails = {
                let mut calls = self.calls.lock().unwrap();
                let first = calls.iter().all(|(at, _)| *at != now);
                let fails = self.fail_first && first;
                calls.push((now, !fails));
                fails
            };
            let this = self.clone();
            let batch: Vec<PermitId> = renewals.iter().map(|renewal| renewal.permit).collect();
            StoreFuture::new(async move {
                tokio::time::sleep(this.latency).await;
                this.answered.fetch_add(1, Ordering::Relaxed);
                if fails {
                    return Err(StoreError::bad_reply("a clobbered slot"));
                }
                // As a store's `release` does: forgotten first, then removed from the store.
                for permit in &this.released {
                    this.heartbeat.forget(*permit);
                }
                let gone: Vec<PermitId> = batch
                    .into_iter()
                    .filter(|permit| this.gone.contains(permit))
                    .collect();
                let lost = this.heartbeat.forget_gone(&gone);
                this.lost.fetch_add(lost as u64, Ordering::Relaxed);
                Ok(gone)
            })
        }
    }

    fn hold(store: &Arc<Fake>, ttl: PermitTtl) -> PermitId {
        let permit = PermitId::next();
        hold_as(store, permit, ttl);
        permit
    }

    fn hold_as(store: &Arc<Fake>, permit: PermitId, ttl: PermitTtl) {
        Heartbeat::hold(store, Slot::new("t", "k").unwrap(), permit, ttl);
    }

    const SECOND: Duration = Duration::from_secs(1);
    /// Renewed every second.
    const THREE_SECONDS: PermitTtl = PermitTtl::new(Duration::from_secs(3));

    /// A fleet shedder's 30 s TTL, then a per-user limit's 3 s one on the same store: the task,
    /// asleep until its 10 s round, wakes up for the shorter period.
    #[tokio::test(start_paused = true)]
    async fn a_shorter_period_wakes_the_sleeping_task() {
        let store = Arc::new(Fake::new(Duration::ZERO));
        let start = Instant::now();
        hold(&store, PermitTtl::new(30 * SECOND));
        tokio::time::sleep(SECOND / 2).await;
        hold(&store, THREE_SECONDS);
        tokio::time::sleep(3 * SECOND).await;
        assert_eq!(store.call_times(start), [SECOND, 2 * SECOND, 3 * SECOND]);
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_start_a_period_apart_however_long_they_take() {
        let store = Arc::new(Fake::new(SECOND * 2 / 5));
        let start = Instant::now();
        hold(&store, THREE_SECONDS);
        tokio::time::sleep(3 * SECOND + SECOND / 2).await;
        assert_eq!(store.call_times(start), [SECOND, 2 * SECOND, 3 * SECOND]);
    }

    /// Four batches, each answering in 0.8 periods: sent one after the other, the last would be
    /// answered 3.2 periods after its round began, its TTL long gone.
    #[tokio::test(start_paused = true)]
    async fn every_batch_of_a_round_goes_out_at_once() {
        let store = Arc::new(Fake::new(SECOND * 4 / 5));
        let start = Instant::now();
        for _ in 0..3 * BATCH + 1 {
            hold(&store, THREE_SECONDS);
        }
        tokio::time::sleep(2 * SECOND + SECOND * 9 / 10).await;
        assert_eq!(
            store.call_times(start),
            [[SECOND; 4], [2 * SECOND; 4]].concat()
        );
        assert_eq!(store.answered.load(Ordering::Relaxed), 8);
    }

    /// One batch fails every round (a clobbered key in Redis, say): the other three are renewed
    /// all the same, every round.
    #[tokio::test(start_paused = true)]
    async fn a_failing_batch_starves_no_other() {
        let store = Arc::new(Fake {
            fail_first: true,
            ..Fake::new(Duration::ZERO)
        });
        for _ in 0..3 * BATCH + 1 {
            hold(&store, THREE_SECONDS);
        }
        tokio::time::sleep(3 * SECOND + SECOND / 2).await;
        let calls = store.calls.lock().unwrap();
        let succeeded = calls.iter().filter(|(_, ok)| *ok).count();
        assert_eq!((calls.len(), succeeded), (12, 9));
    }

    /// A 1 ms renewal period does not mean a store has 1 ms to answer: each round (20 ms here)
    /// gets the time it needs, and the next one, overdue, starts as soon as it ends.
    #[tokio::test(start_paused = true)]
    async fn a_round_has_time_to_finish_however_short_the_period() {
        let store = Arc::new(Fake::new(Duration::from_millis(20)));
        let ttl =
            PermitTtl::new(Duration::from_millis(100)).with_renewal_every(Duration::from_millis(1));
        hold(&store, ttl);
        tokio::time::sleep(Duration::from_millis(90)).await;
        // Calls at 1, 21, 41, 61 and 81 ms; all but the last answered.
        let calls = store.calls.lock().unwrap().len();
        assert_eq!((calls, store.answered.load(Ordering::Relaxed)), (5, 4));
    }

    #[test]
    fn a_round_lasts_a_period_within_bounds() {
        let deadline = |ttl: Duration, every: Duration| {
            let heartbeat = Heartbeat::new();
            heartbeat.every_us.store(micros(every), Ordering::Relaxed);
            heartbeat.ttl_us.store(micros(ttl), Ordering::Relaxed);
            heartbeat.round_deadline()
        };
        let ms = Duration::from_millis;
        assert_eq!(deadline(30 * SECOND, 10 * SECOND), 10 * SECOND);
        assert_eq!(
            deadline(ms(100), ms(1)),
            ms(99),
            "at most the TTL minus a period"
        );
        assert_eq!(deadline(10 * SECOND, ms(5)), MIN_ROUND);
        assert_eq!(deadline(ms(100), ms(99)), ms(1));
    }

    /// Collects what is logged, as text.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Logs {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Logs {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// A renewal finds two permits gone: one released while the renewal was on its way (a busy
    /// server sees this every round), one still held here (its TTL ended: really lost). Only
    /// the second is reported.
    #[tokio::test(start_paused = true)]
    async fn only_permits_still_held_count_as_lost() {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _logging = tracing::subscriber::set_default(subscriber);

        let [released, expired, live] = [(); 3].map(|_| PermitId::next());
        let store = Arc::new(Fake {
            gone: vec![released, expired],
            released: vec![released],
            ..Fake::new(Duration::from_millis(100))
        });
        for permit in [released, expired, live] {
            hold_as(&store, permit, THREE_SECONDS);
        }
        tokio::time::sleep(SECOND * 3 / 2).await;
        assert_eq!(store.lost.load(Ordering::Relaxed), 1);
        assert_eq!(store.heartbeat.len(), 1, "only the live permit is renewed");
        let logs = logs.text();
        assert!(
            logs.contains("lost=1") && !logs.contains("lost=2"),
            "{logs}"
        );
    }
}
