//! The supervisor's state machine, against a fake Redis (no server to install) except for one
//! test against a real replica.

mod attempts;
mod replacement;
mod support;

use std::net::SocketAddr;

use redis::IntoConnectionInfo;
use tokio::sync::Semaphore;

use super::*;
use crate::store::redis::connect::standalone;

/// Long enough never to expire during a test.
const LONG: Duration = Duration::from_secs(3600);

/// The pool a store would make for `addr`, its connections bounded by `connect_timeout`.
fn pool_to(addr: SocketAddr, connect_timeout: Duration) -> Pool {
    let info = format!("redis://{addr}").into_connection_info().unwrap();
    standalone::pool(info, connect_timeout).unwrap()
}

fn supervisor(connect: Connect, stale_after: Duration, backoff: Duration) -> Arc<SharedConnection> {
    SharedConnection::new(connect, stale_after, (backoff, backoff), true)
}

/// A supervisor of connections to `addr`, as a store makes them.
fn supervisor_of(
    addr: SocketAddr,
    stale_after: Duration,
    backoff: Duration,
) -> Arc<SharedConnection> {
    supervisor(
        from_pool(pool_to(addr, Duration::from_secs(5))),
        stale_after,
        backoff,
    )
}

/// A connector whose attempts wait until `gate` has a permit, then connect through `pool`.
fn gated(pool: Pool, gate: Arc<Semaphore>) -> Connect {
    Box::new(move || {
        let (pool, gate) = (pool.clone(), gate.clone());
        async move {
            let _open = gate.acquire().await;
            pool.get()
                .await
                .map(|c| Link::Server(deadpool_redis::Connection::take(c)))
        }
        .boxed()
    })
}

/// A connector that connects through whichever pool the returned handle holds at the time.
fn switchable(pool: Pool) -> (Connect, Arc<Mutex<Pool>>) {
    let current = Arc::new(Mutex::new(pool));
    let handle = current.clone();
    let connect: Connect = Box::new(move || {
        let pool = current.lock().unwrap().clone();
        async move {
            pool.get()
                .await
                .map(|c| Link::Server(deadpool_redis::Connection::take(c)))
        }
        .boxed()
    });
    (connect, handle)
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Connected(u64),
    Connecting,
    Failed,
}

fn phase(connection: &SharedConnection) -> Phase {
    match &*connection.lock() {
        State::Idle => Phase::Idle,
        State::Connected { generation, .. } => Phase::Connected(*generation),
        State::Connecting { .. } => Phase::Connecting,
        State::Failed { .. } => Phase::Failed,
    }
}

fn attempts(connection: &SharedConnection) -> u64 {
    connection.attempts.load(Ordering::Relaxed)
}

fn expect_err(result: Result<Checkout, StoreError>) -> StoreError {
    match result {
        Ok(checkout) => panic!("expected an error, got connection {}", checkout.generation),
        Err(err) => err,
    }
}

fn expect_checkout(result: Result<Checkout, StoreError>) -> Checkout {
    result.unwrap_or_else(|err| panic!("expected a connection, got {err}"))
}

async fn ping(connection: &Arc<SharedConnection>) -> Result<String, StoreError> {
    connection.query::<String>(&redis::cmd("PING")).await
}
