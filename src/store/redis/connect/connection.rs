//! One multiplexed connection shared by every decision, replaced through the pool when it breaks.
//!
//! Checking a connection out of deadpool-redis per decision costs an extra round trip (it sends
//! UNWATCH and PING to validate the connection), which halves throughput. Redis connections are
//! multiplexed, so one pipelines every concurrent decision; the pool is only the factory that
//! builds a replacement (with its create timeout) when the connection fails.
//!
//! Failure handling, so that a dead Redis costs nothing and a hung one is noticed:
//! - a connection error drops the connection; the next call reconnects;
//! - one reconnect at a time: concurrent callers wait on the same attempt (each within its own
//!   deadline), and the attempt runs on its own task, so it completes even if they give up;
//! - an attempt whose task never finished (it panicked, or its runtime shut down) counts as a
//!   failed one, so the next call after the backoff tries again;
//! - after a failed attempt, whatever the error, calls fail at once until a backoff (doubling, up
//!   to a cap) expires, so an outage costs no network round trips and no connect storms;
//! - a connection that has left a request unanswered for `stale_after` (a partition, a frozen
//!   server: TCP stays open but nothing comes back) is presumed dead and replaced;
//! - READONLY or MASTERDOWN (a replica, typically after a failover) drops the connection, so the
//!   next one finds the new primary (through the sentinels, for a store on Sentinel);
//! - a Redis Cluster link is kept through one node's errors (redis-rs reconnects nodes and
//!   refreshes slots itself), and replaced only when it stops answering.
//!
//! # Why not redis-rs's `ConnectionManager`
//!
//! `redis::aio::ConnectionManager` (redis 1.8, as its source reads) keeps one multiplexed
//! connection and reconnects in the background too, but:
//! - callers wait on reconnect attempts instead of failing fast: its backoff runs inside the
//!   reconnect future (up to `number_of_retries` attempts with sleeps between them), which every
//!   call awaits; once that future fails, the next call that sees an I/O error starts another at
//!   once. With no retries there is no wait at all: each failed attempt is followed at once by
//!   another, started by the next call;
//! - a failed connect that is not an I/O error (a wrong password, a refused SELECT) stays in
//!   place: every later call returns it and nothing reconnects;
//! - a connection that stops answering (a frozen server, a partition) is kept: it reconnects only
//!   on `is_unrecoverable_error()`, and a response timeout (I/O `TimedOut`) is not one; besides,
//!   that timeout runs in the caller's future, so a caller that gives up at its own, shorter
//!   deadline reports nothing;
//! - READONLY is `RefreshSlotsAndRetry`, not unrecoverable, so after a failover it keeps its
//!   connection to the demoted replica;
//! - it calls `tokio::spawn` when created, so it cannot be made before a runtime runs (this store
//!   is built before), and its first connection is not spawned: it advances only while a caller
//!   awaits it.
//!
//! What it does have, this supervisor has too: one reconnect at a time, shared by every caller
//! and spawned so it completes if they give up; and a reconnect task that dies does not wedge it
//! (its callers drive the shared future themselves).

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use deadpool_redis::{Pool, PoolError};
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use redis::{ErrorKind, RedisError, ServerErrorKind};
use tokio::task::JoinError;

use crate::store::redis::script::Dialect;
use crate::store::{StoreError, StoreErrorKind};
use crate::sync::lock;

mod call;
mod link;
#[cfg(feature = "regions")]
mod scan;

use self::call::dialect_code;
#[cfg(test)]
mod tests;

pub(in crate::store::redis) use self::link::Link;

/// Makes one new connection. The supervisor runs at most one at a time, on its own task.
///
/// Its errors are pool errors; the supervisor reports them as `StoreErrorKind::NeverSent`, since
/// no command was sent.
pub(in crate::store::redis) type Connect =
    Box<dyn Fn() -> BoxFuture<'static, Result<Link, PoolError>> + Send + Sync>;

/// Connections made by `pool`, each taken out of it for good (so none is ever recycled, and the
/// pool's size never limits a replacement).
pub(in crate::store::redis) fn from_pool(pool: Pool) -> Connect {
    Box::new(move || {
        let pool = pool.clone();
        async move {
            let connection = pool.get().await?;
            Ok(Link::Server(deadpool_redis::Connection::take(connection)))
        }
        .boxed()
    })
}

/// Makes a connection with `connect` (several round trips: a cluster's discovery, the sentinels
/// then the primary) within `timeout` as a whole.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
pub(in crate::store::redis) async fn within(
    timeout: Duration,
    connect: impl std::future::Future<Output = redis::RedisResult<Link>>,
) -> Result<Link, PoolError> {
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(link)) => Ok(link),
        Ok(Err(err)) => Err(PoolError::Backend(err)),
        Err(_) => Err(PoolError::Timeout(deadpool_redis::TimeoutType::Create)),
    }
}

/// How a connection is doing: the moment (ms since `epoch`) since which a request has been
/// waiting for a reply, or 0 when every request was answered.
#[derive(Debug, Default)]
pub(in crate::store::redis) struct Health {
    waiting_since_ms: AtomicU64,
}

/// A connection for one call, and the health record to report to.
pub(in crate::store::redis) struct Checkout {
    pub(in crate::store::redis) connection: Link,
    pub(in crate::store::redis) health: Arc<Health>,
    generation: u64,
}

#[derive(Clone)]
enum State {
    Idle,
    Connected {
        connection: Link,
        health: Arc<Health>,
        generation: u64,
    },
    Connecting {
        /// Tells this attempt apart from later ones.
        attempt: u64,
        outcome: Shared<BoxFuture<'static, Result<(), StoreError>>>,
    },
    Failed {
        retry_at: Instant,
        error: StoreError,
    },
}

pub(in crate::store::redis) struct SharedConnection {
    connect: Connect,
    /// How calls reach the entry points now (see `script::Dialect`): 0 functions, 1 scripts.
    dialect: AtomicU8,
    /// Whether to use functions where the server has them (`RedisStoreBuilder::functions`).
    functions: bool,
    state: Mutex<State>,
    /// Consecutive failed attempts, for the backoff.
    failures: AtomicU64,
    /// Connection attempts started.
    attempts: AtomicU64,
    generation: AtomicU64,
    epoch: Instant,
    stale_after: Duration,
    backoff: (Duration, Duration),
}

impl SharedConnection {
    pub(in crate::store::redis) fn new(
        connect: Connect,
        stale_after: Duration,
        backoff: (Duration, Duration),
        functions: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            connect,
            dialect: AtomicU8::new(dialect_code(if functions {
                Dialect::Functions
            } else {
                Dialect::Scripts
            })),
            functions,
            state: Mutex::new(State::Idle),
            failures: AtomicU64::new(0),
            attempts: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            epoch: Instant::now(),
            stale_after,
            backoff,
        })
    }

    /// The shared connection, connecting first if needed.
    pub(in crate::store::redis) async fn get(self: &Arc<Self>) -> Result<Checkout, StoreError> {
        loop {
            let pending = {
                let mut state = self.lock();
                match &*state {
                    State::Connected {
                        connection,
                        health,
                        generation,
                    } => {
                        if self.is_stale(health) {
                            tracing::warn!(
                                stale_after = ?self.stale_after,
                                "Redis has not answered for too long; replacing the connection"
                            );
                            *state = State::Idle;
                            continue;
                        }
                        return Ok(Checkout {
                            connection: connection.clone(),
                            health: health.clone(),
                            generation: *generation,
                        });
                    }
                    State::Failed { retry_at, error } if Instant::now() < *retry_at => {
                        return Err(error.clone());
                    }
                    State::Connecting { outcome, .. } => outcome.clone(),
                    State::Idle | State::Failed { .. } => {
                        let attempt = self.attempts.fetch_add(1, Ordering::Relaxed);
                        let outcome = self.spawn_connect(attempt);
                        *state = State::Connecting {
                            attempt,
                            outcome: outcome.clone(),
                        };
                        outcome
                    }
                }
            };
            pending.await?;
        }
    }

    /// Runs one command on the shared connection, keeping its health record.
    pub(in crate::store::redis) async fn query<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        command: &redis::Cmd,
    ) -> Result<T, StoreError> {
        let mut checkout = self.get().await?;
        checkout.health.sending(self.now_ms());
        let reply = command.query_async::<T>(&mut checkout.connection).await;
        self.settle(&checkout, reply)
    }

    /// Records the reply to a call made on `checkout`.
    pub(in crate::store::redis) fn settle<T>(
        &self,
        checkout: &Checkout,
        reply: redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        match reply {
            Ok(reply) => {
                checkout.health.answered();
                Ok(reply)
            }
            Err(err) => Err(self.failed(checkout, err)),
        }
    }

    /// Reports a failed call; connection-level failures drop the connection they happened on.
    pub(in crate::store::redis) fn failed(
        &self,
        checkout: &Checkout,
        err: RedisError,
    ) -> StoreError {
        checkout.health.answered();
        if !breaks_connection(&err) {
            return StoreError::new(StoreErrorKind::ErrorReply, err);
        }
        // A cluster link is many connections, one per node, and redis-rs reconnects each node
        // and refreshes its slot map by itself: one node's failure (a primary killed before its
        // replica takes over) must not cut the calls to every other node. Only a link that has
        // stopped answering altogether (`stale_after`) is replaced.
        if checkout.connection.is_cluster() {
            return StoreError::new(StoreErrorKind::ConnectionLost, err);
        }
        let mut state = self.lock();
        if matches!(&*state, State::Connected { generation, .. } if *generation == checkout.generation)
        {
            tracing::warn!(error = %err, "lost the Redis connection; reconnecting on the next call");
            *state = State::Idle;
        }
        StoreError::new(StoreErrorKind::ConnectionLost, err)
    }

    /// Starts one connection attempt on its own task and returns its shared outcome.
    fn spawn_connect(
        self: &Arc<Self>,
        attempt: u64,
    ) -> Shared<BoxFuture<'static, Result<(), StoreError>>> {
        let this = self.clone();
        let task = tokio::spawn(async move {
            let result = (this.connect)().await;
            this.finish_connect(result)
        });
        // Weak: the outcome is kept in the state, and must not keep the connection alive.
        let this = Arc::downgrade(self);
        async move {
            match task.await {
                Ok(result) => result,
                Err(join) => Err(abandon_connect(&this, attempt, &join)),
            }
        }
        .boxed()
        .shared()
    }

    fn finish_connect(&self, result: Result<Link, PoolError>) -> Result<(), StoreError> {
        let mut state = self.lock();
        match result {
            Ok(connection) => {
                self.failures.store(0, Ordering::Relaxed);
                // A new server may speak another dialect (a failover to an upgraded primary).
                if self.functions {
                    self.set_dialect(Dialect::Functions);
                }
                let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
                *state = State::Connected {
                    connection,
                    health: Arc::default(),
                    generation,
                };
                tracing::debug!(generation, "connected to Redis");
                Ok(())
            }
            Err(err) => {
                // A failed connection attempt: no command was sent.
                let error = StoreError::new(StoreErrorKind::NeverSent, err);
                self.back_off(&mut state, error.clone());
                Err(error)
            }
        }
    }

    /// Records a failed attempt: calls fail at once with `error` until the backoff expires.
    fn back_off(&self, state: &mut State, error: StoreError) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed);
        let wait = backoff_delay(failures, self.backoff);
        tracing::warn!(error = %error, retry_in = ?wait, "cannot connect to Redis");
        *state = State::Failed {
            retry_at: Instant::now() + wait,
            error,
        };
    }

    fn is_stale(&self, health: &Health) -> bool {
        let since = health.waiting_since_ms.load(Ordering::Relaxed);
        since != 0 && self.now_ms().saturating_sub(since) > self.stale_after.as_millis() as u64
    }

    /// Milliseconds since this connection manager was made, never 0 (0 means "nothing waiting").
    pub(in crate::store::redis) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// The wait after the failed attempt that follows `failures` failed ones: `first`, doubling per
/// failure, at most `max` (the builder keeps `max` within an hour).
pub(in crate::store::redis) fn backoff_delay(
    failures: u64,
    (first, max): (Duration, Duration),
) -> Duration {
    first.saturating_mul(1 << failures.min(16)).min(max)
}

/// The outcome of an attempt whose task ended without recording one: it panicked, or its runtime
/// shut down (a store first used on a runtime that is gone, e.g. in tests). Left alone, the state
/// would stay `Connecting` on this finished attempt and every later call would get its error at
/// once without ever connecting again. A pool error, as every failed attempt's: nothing was sent.
fn abandon_connect(this: &Weak<SharedConnection>, attempt: u64, join: &JoinError) -> StoreError {
    let error = StoreError::new(
        StoreErrorKind::NeverSent,
        RedisError::from((
            ErrorKind::Client,
            "the Redis connect task ended without an outcome",
            join.to_string(),
        )),
    );
    if let Some(this) = this.upgrade() {
        let mut state = this.lock();
        if matches!(&*state, State::Connecting { attempt: current, .. } if *current == attempt) {
            this.back_off(&mut state, error.clone());
        }
    }
    error
}

impl Health {
    /// A request is about to be sent at `now_ms`.
    pub(in crate::store::redis) fn sending(&self, now_ms: u64) {
        let _ =
            self.waiting_since_ms
                .compare_exchange(0, now_ms, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// A reply arrived: the connection is alive.
    pub(in crate::store::redis) fn answered(&self) {
        self.waiting_since_ms.store(0, Ordering::Relaxed);
    }
}

/// Whether an error means the connection itself is unusable (rather than one command failing):
/// any I/O error (reset, closed, timed out: the multiplexed connection reports a dead one as a
/// broken pipe), and READONLY or MASTERDOWN, which mean we are talking to a replica, typically
/// after a failover: reconnect to find the new primary.
///
/// Not a parse error, though redis-rs calls it unrecoverable: its kind also covers a reply of an
/// unexpected type, and reconnecting on that would connect once per call. A real protocol desync
/// ends the connection's driver, so the next call fails with an I/O error.
fn breaks_connection(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || matches!(
            err.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}
