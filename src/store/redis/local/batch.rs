//! Batching: decisions of one policy that arrive while a call of that policy is in flight wait
//! for it, then go to Redis together, as one call that decides each in turn (`lua/decide.lua`),
//! whatever their keys. A busy process then costs Redis, and itself, one call per batch instead
//! of one per request: the call's own work (sending, parsing, Redis's dispatch, the clock) is
//! shared, and so is a hot key's round trip.
//!
//! It is exact: Redis decides a batch's requests one after another, in the order they arrived,
//! exactly as if each had been sent alone after the one before it (a key that appears twice is
//! decided twice, in order). A request of a policy with no call in flight is sent at once, alone:
//! an idle store waits for nothing.
//!
//! - **Cluster.** Every key of one call must be in one hash slot: on a cluster the queues are
//!   per policy and slot (a client's keys are in the slot of its hash tag), so batches gather
//!   the requests of one slot, one client's above all; no call is ever cross-slot.
//! - **Order.** One call of a queue is in flight at a time, so that Redis meets a key's requests
//!   in the order they arrived: a batch leaves when the call before it ends, with up to
//!   [`MAX_BATCH`] requests (a queue drains that many per round trip). Past [`MAX_QUEUE`] waiting
//!   requests, more are sent alone, in no particular order.
//! - **Cancellation.** A request sent alone runs in its caller's future; if the caller gives up
//!   (the layer's deadline drops it), a guard ends its turn as if the call had ended. Batches run
//!   on tasks of their own, so a waiter that gives up loses only its own answer (its request may
//!   still be counted, as any request whose call was sent).
//! - **Errors.** A batch that fails fails every request in it, with the same error.
//! - **Bounds.** The table holds only the policies (and slots) with a call in flight, each with
//!   at most [`MAX_QUEUE`] requests waiting.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;
use tokio::sync::oneshot;

use crate::decision::Verdicts;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::redis::Inner;
use crate::store::redis::connect::slot;
use crate::store::redis::key::StorageKey;
use crate::store::redis::local::Answer;
use crate::store::redis::local::denials::Denials;
use crate::store::redis::script::decide;
use crate::store::{StoreError, StoreFuture};
use crate::sync::lock;

/// The most requests decided by one call.
pub(in crate::store::redis) const MAX_BATCH: usize = 128;

/// The most requests waiting in one queue; more are sent alone.
const MAX_QUEUE: usize = 4_096;

/// How many shards the table is split into (each its own lock).
const SHARDS: usize = 16;

/// The policies (and slots) with a call in flight, and the requests waiting for each.
pub(in crate::store::redis) struct Batcher {
    shards: Box<[Mutex<HashTable<Queue>>]>,
    hasher: foldhash::fast::RandomState,
}

/// A policy and slot with a call in flight.
struct Queue {
    hash: u64,
    policy: Policy,
    slot: u16,
    /// Whether a call of this queue is in flight.
    in_flight: bool,
    waiting: VecDeque<Request>,
}

/// One request to decide.
struct Request {
    key: Key,
    client: StorageKey,
    cost: u32,
    /// When it was asked (for the denial cache).
    asked: u64,
    /// Whether its rules' verdicts are wanted (see `Answer`).
    rules: bool,
    /// Where its answer goes, when it waited for a batch.
    answer: Option<oneshot::Sender<Result<Verdicts, StoreError>>>,
}

/// Where a queue is, in the table.
#[derive(Clone)]
struct Place {
    hash: u64,
    policy: Policy,
    slot: u16,
}

/// A call of a queue in flight: when it ends or is dropped, the requests queued meanwhile go to
/// Redis as a batch.
struct Turn {
    inner: Arc<Inner>,
    place: Place,
}

impl Batcher {
    pub(in crate::store::redis) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashTable::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, HashTable<Queue>> {
        lock(&self.shards[(hash >> 32) as usize % self.shards.len()])
    }
}

/// Redis's decision on a request of `cost` for `key` under `policy`, asked at `asked`: sent at
/// once if no call of the policy (and slot) is in flight or the store does not batch, else in
/// the next batch.
pub(in crate::store::redis) fn decide<A: Answer>(
    inner: &Arc<Inner>,
    key: &Key,
    policy: &Policy,
    cost: u32,
    asked: u64,
) -> StoreFuture<A> {
    let client = StorageKey::new(key);
    let request = Request {
        key: key.clone(),
        client,
        cost,
        asked,
        rules: A::RULES,
        answer: None,
    };
    if !inner.batch {
        let (inner, policy) = (inner.clone(), policy.clone());
        return StoreFuture::new(async move { alone(&inner, &policy, request).await });
    }
    let slot = if inner.cluster {
        slot::of(request.client.as_str())
    } else {
        0
    };
    let batcher = &inner.batcher;
    let hash = batcher.hasher.hash_one((policy.rule_ids(), slot));
    let place = Place {
        hash,
        policy: policy.clone(),
        slot,
    };
    let mut shard = batcher.shard(hash);
    let queue = match shard.find_mut(hash, |queue| queue.is(&place)) {
        Some(queue) => queue,
        None => {
            shard.insert_unique(hash, Queue::new(&place), |queue| queue.hash);
            shard
                .find_mut(hash, |queue| queue.is(&place))
                .expect("just inserted")
        }
    };
    if !queue.in_flight {
        queue.in_flight = true;
        drop(shard);
        let turn = Turn {
            inner: inner.clone(),
            place,
        };
        return StoreFuture::new(async move {
            let decision = alone(&turn.inner, &turn.place.policy, request).await;
            // The queue goes on once this call has been learned from (also when this future is
            // dropped before: the turn's drop hands it on then).
            drop(turn);
            decision
        });
    }
    if queue.waiting.len() >= MAX_QUEUE {
        drop(shard);
        let (inner, policy) = (inner.clone(), policy.clone());
        return StoreFuture::new(async move { alone(&inner, &policy, request).await });
    }
    let (answer, receiver) = oneshot::channel();
    queue.waiting.push_back(Request {
        answer: Some(answer),
        ..request
    });
    wait(receiver)
}

/// A request decided in a call of its own.
async fn alone<A: Answer>(
    inner: &Inner,
    policy: &Policy,
    request: Request,
) -> Result<A, StoreError> {
    let mut decided = send(inner, policy, std::slice::from_ref(&request)).await?;
    Ok(A::replied(decided.remove(0)))
}

/// Decides `requests` in one call, and teaches the denial cache their answers: each decision,
/// with its rules' verdicts for the requests that want them.
async fn send(
    inner: &Inner,
    policy: &Policy,
    requests: &[Request],
) -> Result<Vec<Verdicts>, StoreError> {
    if let Some(listener) = &inner.listener {
        listener.first_tried().await;
    }
    let epoch = inner.denials.as_ref().map_or(0, Denials::epoch);
    let states = inner.names.of(policy);
    let call = decide::call(
        &inner.prefix,
        policy,
        &states,
        requests
            .iter()
            .map(|request| (request.client.as_str(), request.cost)),
        inner.clock.as_ref().map(|clock| clock.now_micros()),
        inner.min_ttl_ms,
    );
    let reply: Vec<u8> = inner.connection.call(&call).await?;
    let values = decide::values(&reply, policy, requests.len())?;
    requests
        .iter()
        .enumerate()
        .map(|(index, request)| {
            let values = decide::request(&values, policy, index);
            let decision = decide::decision(values, policy)?;
            if let Some(denials) = &inner.denials {
                let asked = (request.asked, epoch);
                denials.learn(&request.key, policy, request.cost, asked, &decision, || {
                    decide::rule_waits(values)
                });
            }
            let rules = match request.rules {
                true => decide::verdicts(values)?,
                false => Vec::new(),
            };
            Ok(Verdicts::new(decision, rules))
        })
        .collect()
}

/// Sends `batch` on a task of its own, as its queue's call in flight.
fn launch(inner: &Arc<Inner>, place: Place, batch: Vec<Request>) {
    let task = run(inner.clone(), place.clone(), batch);
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(task)),
        // No runtime to run the batch on (a caller dropped outside of one): its waiters' own
        // deadlines answer them (their answers are dropped with the task), and the queue goes on.
        Err(_) => {
            drop(task);
            finished(inner, &place);
        }
    }
}

/// Decides `batch`, answers each waiter, then ends the call's turn.
async fn run(inner: Arc<Inner>, place: Place, batch: Vec<Request>) {
    let turn = Turn { inner, place };
    match send(&turn.inner, &turn.place.policy, &batch).await {
        Ok(decisions) => {
            for (request, decision) in batch.into_iter().zip(decisions) {
                // A waiter that gave up is gone: nothing to answer.
                if let Some(answer) = request.answer {
                    let _ = answer.send(Ok(decision));
                }
            }
        }
        Err(err) => {
            for request in batch {
                if let Some(answer) = request.answer {
                    let _ = answer.send(Err(err.clone()));
                }
            }
        }
    }
}

/// A call of the queue at `place` ended: the next batch of its queue goes to Redis, or, with
/// nothing waiting, the queue leaves the table.
fn finished(inner: &Arc<Inner>, place: &Place) {
    let mut shard = inner.batcher.shard(place.hash);
    let Ok(mut entry) = shard.find_entry(place.hash, |queue| queue.is(place)) else {
        return;
    };
    let queue = entry.get_mut();
    if queue.waiting.is_empty() {
        entry.remove();
        return;
    }
    let take = queue.waiting.len().min(MAX_BATCH);
    let batch: Vec<Request> = queue.waiting.drain(..take).collect();
    drop(shard);
    launch(inner, place.clone(), batch);
}

impl Queue {
    fn new(place: &Place) -> Self {
        Self {
            hash: place.hash,
            policy: place.policy.clone(),
            slot: place.slot,
            in_flight: false,
            waiting: VecDeque::new(),
        }
    }

    fn is(&self, place: &Place) -> bool {
        self.slot == place.slot && self.policy.same(&place.policy)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        finished(&self.inner, &self.place);
    }
}

/// The answer of a request that joined a batch.
fn wait<A: Answer>(receiver: oneshot::Receiver<Result<Verdicts, StoreError>>) -> StoreFuture<A> {
    StoreFuture::new(async move {
        let answer = receiver.await.unwrap_or_else(|_| {
            Err(StoreError::bad_reply(
                "a batched decision was dropped before Redis answered".to_owned(),
            ))
        });
        answer.map(A::replied)
    })
}

#[cfg(test)]
mod tests {
    use super::MAX_BATCH;

    /// The builder's docs and the README tell users how many requests one call holds; they
    /// once said 64 after the batch had grown to 128.
    #[test]
    fn the_docs_tell_the_batch_size() {
        let builder = include_str!("../builder.rs");
        assert!(builder.contains(&format!("per batch (up to {MAX_BATCH} requests)")));
        let readme = include_str!("../../../../README.md");
        assert!(readme.contains(&format!("one call per batch (up to {MAX_BATCH})")));
    }
}
