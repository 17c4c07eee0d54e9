//! Hot-key coalescing: decisions for one key and policy that arrive while a call for it is in
//! flight wait for it, then go to Redis together as one call that decides each in order
//! (`lua/batch.lua`), so a hot key costs one round trip per batch instead of one per request.
//!
//! It is exact: Redis decides the queued requests one after another, in the order they arrived,
//! exactly as if each had been sent alone after the call before it. A request for a key with no
//! call in flight goes to Redis at once, as without coalescing: an uncontended key waits for
//! nothing.
//!
//! - **Cancellation.** The caller of the call in flight may give up (the layer's deadline drops
//!   its future): a guard then hands the queue on as if the call had ended. Batches run on tasks
//!   of their own, so a waiter that gives up loses only its own answer (its request may still be
//!   counted, as any request whose call was sent).
//! - **Errors.** A batch that fails fails every request in it, with the same error.
//! - **Bounds.** The table holds only keys with a call in flight; a key's queue holds at most
//!   [`MAX_QUEUE`] requests (more go to Redis on their own), and a batch at most [`MAX_BATCH`].

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;
use tokio::sync::oneshot;

use super::denials::Denials;
use super::{Inner, script};
use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::key::StorageKey;
use crate::store::{StoreError, StoreFuture};
use crate::sync::lock;

/// The most requests decided by one call.
const MAX_BATCH: usize = 64;

/// The most requests waiting for one key; more are sent on their own.
const MAX_QUEUE: usize = 1_024;

/// How many shards the table is split into (each its own lock).
const SHARDS: usize = 16;

/// The keys with a call in flight, and the requests waiting for each.
pub(super) struct Coalescer {
    shards: Box<[Mutex<HashTable<Flight>>]>,
    hasher: foldhash::fast::RandomState,
}

/// A key and policy with a call in flight.
struct Flight {
    hash: u64,
    key: Key,
    policy: Policy,
    queue: VecDeque<Waiter>,
}

/// A request waiting for the call in flight to end.
struct Waiter {
    cost: u32,
    /// When it was asked (for the denial cache, as for a request sent alone).
    asked: u64,
    answer: oneshot::Sender<Result<Decision, StoreError>>,
}

/// What a request does.
pub(super) enum Turn {
    /// Call Redis now, holding this guard until the call ends (or is dropped).
    Lead(Lead),
    /// Wait for the batch this request joined.
    Wait(oneshot::Receiver<Result<Decision, StoreError>>),
    /// Call Redis now, on its own (the key's queue is full).
    Alone,
}

/// The call in flight for a key: when it ends or is dropped, the requests queued meanwhile go
/// to Redis as a batch.
pub(super) struct Lead {
    inner: Arc<Inner>,
    key: Key,
    policy: Policy,
}

impl Coalescer {
    pub(super) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashTable::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The turn of a request of `cost` for `key` under `policy`, asked at `asked`.
    pub(super) fn turn(
        inner: &Arc<Inner>,
        key: &Key,
        policy: &Policy,
        cost: u32,
        asked: u64,
    ) -> Turn {
        let coalescer = &inner.coalescer;
        let hash = coalescer.hash(key, policy);
        let mut shard = coalescer.shard(hash);
        match shard.find_mut(hash, |flight| flight.is(key, policy)) {
            Some(flight) if flight.queue.len() >= MAX_QUEUE => Turn::Alone,
            Some(flight) => {
                let (answer, receiver) = oneshot::channel();
                flight.queue.push_back(Waiter {
                    cost,
                    asked,
                    answer,
                });
                Turn::Wait(receiver)
            }
            None => {
                let flight = Flight {
                    hash,
                    key: key.clone(),
                    policy: policy.clone(),
                    queue: VecDeque::new(),
                };
                shard.insert_unique(hash, flight, |flight| flight.hash);
                Turn::Lead(Lead {
                    inner: inner.clone(),
                    key: key.clone(),
                    policy: policy.clone(),
                })
            }
        }
    }

    /// The call in flight for `key` and `policy` ended: the next batch of its queue goes to
    /// Redis, or, with none waiting, the key leaves the table.
    fn next(inner: &Arc<Inner>, key: &Key, policy: &Policy) {
        let coalescer = &inner.coalescer;
        let hash = coalescer.hash(key, policy);
        let batch: Vec<Waiter> = {
            let mut shard = coalescer.shard(hash);
            let Ok(mut flight) = shard.find_entry(hash, |flight| flight.is(key, policy)) else {
                return;
            };
            if flight.get().queue.is_empty() {
                flight.remove();
                return;
            }
            let queue = &mut flight.get_mut().queue;
            let take = queue.len().min(MAX_BATCH);
            queue.drain(..take).collect()
        };
        let task = decide_batch(inner.clone(), key.clone(), policy.clone(), batch);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(task);
            }
            // No runtime to run the batch on (a caller dropped outside of one): its waiters' own
            // deadlines answer them; the key leaves the table so that it is not stuck.
            Err(_) => {
                let mut shard = coalescer.shard(hash);
                if let Ok(flight) = shard.find_entry(hash, |flight| flight.is(key, policy)) {
                    flight.remove();
                }
            }
        }
    }

    fn hash(&self, key: &Key, policy: &Policy) -> u64 {
        self.hasher.hash_one((key.as_bytes(), policy.rule_ids()))
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, HashTable<Flight>> {
        lock(&self.shards[(hash >> 32) as usize % self.shards.len()])
    }
}

impl Flight {
    fn is(&self, key: &Key, policy: &Policy) -> bool {
        self.key == *key && self.policy.same(policy)
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        Coalescer::next(&self.inner, &self.key, &self.policy);
    }
}

/// Decides `batch` in one call, answers each waiter, then hands the key on to the next batch.
async fn decide_batch(inner: Arc<Inner>, key: Key, policy: Policy, batch: Vec<Waiter>) {
    let costs: Vec<u32> = batch.iter().map(|waiter| waiter.cost).collect();
    let epoch = inner.denials.as_ref().map_or(0, Denials::epoch);
    let client = StorageKey::new(&key);
    let invocation = script::batch_invocation(
        &inner.prefix,
        client.as_str(),
        &policy,
        &costs,
        inner.clock.as_ref().map(|clock| clock.now_micros()),
        inner.min_ttl_ms,
    );
    let reply = inner.connection.invoke::<Vec<i64>>(&invocation).await;
    let decided = reply.and_then(|reply| {
        let decisions = script::decisions(&reply, &policy, batch.len())?;
        Ok((reply, decisions))
    });
    match decided {
        Ok((reply, decisions)) => {
            let width = reply.len() / decisions.len().max(1);
            let replies = reply.chunks_exact(width.max(1));
            for ((waiter, decision), reply) in batch.into_iter().zip(decisions).zip(replies) {
                if let Some(denials) = &inner.denials {
                    let asked = (waiter.asked, epoch);
                    denials.learn(&key, &policy, waiter.cost, asked, &decision, || {
                        script::rule_waits(reply)
                    });
                }
                // A waiter that gave up is gone: nothing to answer.
                let _ = waiter.answer.send(Ok(decision));
            }
        }
        Err(err) => {
            for waiter in batch {
                let _ = waiter.answer.send(Err(err.clone()));
            }
        }
    }
    Coalescer::next(&inner, &key, &policy);
}

/// The answer of a request that joined a batch.
pub(super) fn wait(
    receiver: oneshot::Receiver<Result<Decision, StoreError>>,
) -> StoreFuture<Decision> {
    StoreFuture::new(async move {
        receiver.await.unwrap_or_else(|_| {
            Err(StoreError::bad_reply(
                "a coalesced decision was dropped before Redis answered".to_owned(),
            ))
        })
    })
}
