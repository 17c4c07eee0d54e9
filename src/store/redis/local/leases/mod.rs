//! Quota leases: a hot key's quota reserved in Redis a slice at a time and spent in process.
//!
//! An instance that sees a key often reserves a slice of the key's remaining quota under every
//! rule of its policy with one call (`lua/grant.lua`), then answers the key's next requests from
//! the slice with no network call, until it is spent or a lifetime has passed; the units it did
//! not spend then go back (`lua/refund.lua`). Because a slice is taken from Redis before it is
//! spent, the fleet never spends more than Redis granted; the price is that one instance may
//! deny while others hold unspent slices.
//!
//! - **Heat.** A key first counts itself in a lock-free counter ([`heat`]): only one asked twice
//!   in a lifetime here reaches the table, which then measures its demand itself. Keys asked
//!   less often (most keys of a public API) cost the leases one atomic load and store.
//! - **Sizing.** A slice is what the key asked of this instance in the last lifetime, at most
//!   [`max_share`](QuotaLeases::max_share) of what each rule gives in a lifetime. A key seen
//!   once, or asking a unit per lifetime, is not leased: it is decided by Redis, exactly.
//! - **Rates.** A GCRA or token-bucket slice may reserve ahead: units past the bucket's capacity
//!   up to what drains back within a lifetime (the rule's horizon), each with the time it
//!   conforms ([`Pace`](script::Pace)). The lessee spends a unit no earlier, and refuses a
//!   request whose unit is not due yet, with the wait to it: a key offered more than its rate
//!   costs one grant per lifetime, not a call per request.
//! - **Flow.** The request that finds no slice asks for one and is answered from it; when a slice
//!   runs low (a quarter of the next slice's size left) the next one is asked for in the
//!   background, so a hot key's requests do not wait. While a grant is in flight, requests the
//!   slice cannot cover wait for it. A grant Redis refused is answered here until its wait ends.
//! - **Giving back.** A slice's unspent units go back when its lifetime ends (a background task
//!   sweeps every half lifetime), when a fixed window it was reserved in ends (those units are
//!   lost with the window, never spent in the next), and on
//!   [`RedisStore::return_leases`](crate::RedisStore::return_leases) at shutdown, which waits
//!   for grants in flight. A refund never returns more than the slice took: a fixed window's
//!   units go back only to the window they came from; a bucket's only as far as the grant's own
//!   level has not already drained.
//! - **What it costs in exactness.** Fixed window: no over-admission (a slice is spent within its
//!   window). GCRA and token bucket: a unit counts in Redis at the instant it conforms there, and
//!   is spent up to a lifetime later, so over any interval the fleet admits at most the rule's
//!   burst plus its rate over the interval *and one lifetime*. Under-admission: at most N ×
//!   `max_share` of what a rule gives in a lifetime (N instances) is held in slices at once, for
//!   at most a lifetime after its instance stops using it. Remembered denials (the denial cache,
//!   a refused grant) can outlast capacity that a refund gave back. `docs/performance.md`
//!   measures both against the exact mode.
//! - **Not leased:** the sliding log and the sliding window. Both remember *when* each unit was
//!   spent and give it back a whole period later; a slice would record its units at the grant,
//!   and a refund would have to find and remove them from a log, or from a sub-window of a
//!   weighted count, of which neither keeps track by whom. A policy with such a rule is decided
//!   by Redis, exactly, one call per request. Nor a policy with a rule that has a `max_delay`:
//!   a slice spends a unit only once it conforms and refuses the request before, where Redis
//!   admits it to wait; such a policy is decided by Redis too, which queues it.

mod config;
mod entry;
mod heat;
mod script;
mod table;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

pub use self::config::QuotaLeases;
pub(in crate::store::redis) use self::table::Leases;
use self::table::{InFlight, LeaseStep, Refund};
use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::redis::key::StorageKey;
use crate::store::redis::local::denials::Denials;
use crate::store::redis::{Inner, RedisStore};
use crate::store::{Store, StoreError, StoreFuture};

/// Answers a request of `cost` from a lease of `key` under `policy`, or asks Redis for one; `None`
/// when Redis should decide the request alone.
pub(in crate::store::redis) fn decide(
    inner: &Arc<Inner>,
    leases: &Leases,
    key: &Key,
    policy: &Policy,
    cost: u32,
    asked: u64,
) -> Option<StoreFuture<Decision>> {
    let mut refunds = Vec::new();
    let plan = leases.plan(key, policy, cost, asked, &mut refunds);
    give_back(inner, refunds);
    match plan {
        LeaseStep::Exact => None,
        LeaseStep::Wait(mut landed) => {
            let store = RedisStore {
                inner: inner.clone(),
            };
            let (key, policy) = (key.clone(), policy.clone());
            Some(StoreFuture::new(async move {
                // Closed: the key was forgotten, which also ends its grant. Plan again either way.
                let _ = landed.changed().await;
                store.check(&key, &policy, cost).await
            }))
        }
        LeaseStep::Local { decision, prefetch } => {
            if let Some(want) = prefetch {
                let started = Started::now(inner, leases, asked);
                let task = grant(inner.clone(), started, key.clone(), policy.clone(), 0, want);
                if spawn(task).is_none() {
                    leases.abandon(key, policy);
                }
            }
            Some(StoreFuture::ready(Ok(decision)))
        }
        LeaseStep::Grant { want } => {
            let started = Started::now(inner, leases, asked);
            let task = grant(
                inner.clone(),
                started,
                key.clone(),
                policy.clone(),
                cost,
                want,
            );
            // A task of its own: a request dropped at its deadline leaves the grant to finish and
            // land, rather than reserved in Redis and lost here.
            let Some(handle) = spawn(task) else {
                leases.abandon(key, policy);
                return None;
            };
            Some(StoreFuture::new(async move {
                handle.await.map_err(|err| {
                    StoreError::bad_reply(format!("a quota lease's grant did not finish: {err}"))
                })?
            }))
        }
    }
}

/// Gives back every lease this store holds; see
/// [`RedisStore::return_leases`](crate::RedisStore::return_leases).
pub(in crate::store::redis) async fn return_all(inner: &Inner) -> Result<(), StoreError> {
    let Some(leases) = &inner.leases else {
        return Ok(());
    };
    // The epoch moves on, so that grants in flight give their units back as they land; then
    // they are waited for (a call to a silent server ends within `stale_after`).
    let mut refunds = Vec::new();
    leases.forget_all(&mut refunds);
    let mut first_error = None;
    for refund in refunds {
        if let Err(err) = send_refund(inner, &refund).await {
            first_error.get_or_insert(err);
        }
    }
    leases.settled().await;
    first_error.map_or(Ok(()), Err)
}

/// Gives back every lease this store holds, in the background, and keeps no grant asked before:
/// this process may have missed a reset (see `store::redis::reset`), and a lease may hold units
/// of the state it deleted.
pub(in crate::store::redis) fn forget_all(inner: &Arc<Inner>) {
    if let Some(leases) = &inner.leases {
        let mut refunds = Vec::new();
        leases.forget_all(&mut refunds);
        give_back(inner, refunds);
    }
}

/// What a grant knows from the moment it was decided on, before its task first runs. It counts
/// in flight from then, so `return_leases` waits for it; and it belongs to the epochs of then,
/// so a reset or a `return_leases` that comes before the task runs makes it give its units back
/// as it lands, rather than keep them in a table that was just emptied.
struct Started {
    _in_flight: InFlight,
    /// When the request that asked for it was asked (µs, this process's clock).
    asked: u64,
    /// The leases' epoch and the denial cache's.
    epochs: (u64, u64),
}

impl Started {
    fn now(inner: &Inner, leases: &Leases, asked: u64) -> Self {
        Self {
            _in_flight: leases.in_flight(),
            asked,
            epochs: (
                leases.epoch(),
                inner.denials.as_ref().map_or(0, Denials::epoch),
            ),
        }
    }
}

/// Reserves up to `want` units for a request of `cost` (0: a slice asked for in the background)
/// and answers that request.
async fn grant(
    inner: Arc<Inner>,
    started: Started,
    key: Key,
    policy: Policy,
    cost: u32,
    want: u64,
) -> Result<Decision, StoreError> {
    let leases = inner.leases.as_ref().expect("a store with leases");
    if let Some(listener) = &inner.listener {
        listener.first_tried().await;
    }
    // `started` lives to the end: the grant counts in flight until its refund, if any, is sent.
    let (asked, epochs) = (started.asked, started.epochs);
    let client = StorageKey::new(&key);
    let invocation = script::grant(
        &inner.prefix,
        client.as_str(),
        &policy,
        &inner.names.of(&policy),
        cost.max(1),
        want,
        leases.lifetime_us(),
        inner.clock.as_ref().map(|clock| clock.now_micros()),
        inner.min_ttl_ms,
    );
    let granted = match inner.connection.call::<Vec<i64>>(&invocation).await {
        Ok(reply) => script::granted(&reply, &policy),
        Err(err) => Err(err),
    };
    let granted = match granted {
        Ok(granted) => granted,
        Err(err) => {
            leases.abandon(&key, &policy);
            // A grant asked in the background answers no request: no layer counts its error.
            if cost == 0 {
                background_error(&err);
            }
            return Err(err);
        }
    };
    start_sweeping(&inner);
    // The denial cache learns what Redis said (a refusal, or a reservation that makes a
    // remembered refusal stale), not what the lease answers the request.
    if let Some(denials) = inner.denials.as_ref().filter(|_| cost > 0) {
        let said = granted.decision(&policy);
        let waits = granted
            .verdicts
            .iter()
            .map(|verdict| verdict.retry_after_us);
        denials.learn(&key, &policy, cost, (asked, epochs.1), &said, || waits);
    }
    // The units' paces count from now, when Redis's answer is here: no earlier than Redis
    // reckoned them.
    let landed = inner.local_clock.now_micros();
    let (decision, refund) =
        leases.install(&key, &policy, cost, (asked, epochs.0), landed, granted);
    // Rare (the key was forgotten, or a reset came, while the grant was in flight): sent before
    // the grant counts as settled, so that `return_leases` returns once it is back.
    if let Some(refund) = refund
        && let Err(err) = send_refund(&inner, &refund).await
    {
        background_error(&err);
        tracing::warn!(error = %err, "could not give back unspent quota leases; Redis returns them with time");
    }
    Ok(decision)
}

/// Sends `refunds` from a task of their own; a failed refund leaves its units in Redis until
/// time returns them, which is logged, once per sweep at most. `return_leases` waits for them.
fn give_back(inner: &Arc<Inner>, refunds: Vec<Refund>) {
    if refunds.is_empty() {
        return;
    }
    let owner = inner.clone();
    // Counted from now: `return_leases` waits for these refunds too.
    let in_flight = inner.leases.as_ref().map(Leases::in_flight);
    spawn(async move {
        let _in_flight = in_flight;
        let mut failed = 0_usize;
        let mut last = None;
        for refund in &refunds {
            if let Err(err) = send_refund(&owner, refund).await {
                background_error(&err);
                failed += 1;
                last = Some(err);
            }
        }
        if let Some(err) = last {
            tracing::warn!(
                failed,
                error = %err,
                "could not give back unspent quota leases; Redis returns them with time"
            );
        }
    });
}

/// Counts the error of a call made in the background, which no layer sees.
fn background_error(err: &StoreError) {
    crate::telemetry::store_error(crate::telemetry::RATE_LIMITING, err.kind().as_str());
}

async fn send_refund(inner: &Inner, refund: &Refund) -> Result<(), StoreError> {
    let client = StorageKey::new(&refund.key);
    let invocation = script::refund(
        &inner.prefix,
        client.as_str(),
        &refund.policy,
        &inner.names.of(&refund.policy),
        refund.units,
        &refund.marks,
        inner.clock.as_ref().map(|clock| clock.now_micros()),
        inner.min_ttl_ms,
    );
    inner.connection.call::<()>(&invocation).await
}

/// Starts, once per store, the task that gives back expired leases of keys that went quiet. It
/// holds the store weakly and ends with it.
fn start_sweeping(inner: &Arc<Inner>) {
    let Some(leases) = &inner.leases else {
        return;
    };
    if leases.sweeping.swap(true, Ordering::Relaxed) {
        return;
    }
    let period = Duration::from_micros((leases.lifetime_us() / 2).max(1_000));
    let store: Weak<Inner> = Arc::downgrade(inner);
    let started = spawn(async move {
        // A runtime shut down drops this task: the next grant, on whatever runtime then runs the
        // store, starts another.
        let _stopped = Stopped(store.clone());
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(inner) = store.upgrade() else {
                return;
            };
            let leases = inner.leases.as_ref().expect("a store with leases");
            let mut refunds = Vec::new();
            leases.sweep(inner.local_clock.now_micros(), &mut refunds);
            give_back(&inner, refunds);
        }
    });
    if started.is_none() {
        leases.sweeping.store(false, Ordering::Relaxed);
    }
}

/// Marks the sweep of a store as stopped when its task ends or is dropped.
struct Stopped(Weak<Inner>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(leases) = self
            .0
            .upgrade()
            .as_ref()
            .and_then(|inner| inner.leases.as_ref())
        {
            leases.sweeping.store(false, Ordering::Relaxed);
        }
    }
}

/// Spawns `task` on the current Tokio runtime; `None` outside of one.
fn spawn<F>(task: F) -> Option<tokio::task::JoinHandle<F::Output>>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(task))
}
