//! Calls of the entry points on the shared connection, in the dialect the server speaks, with the
//! library or script loaded when the server lacks it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Checkout, SharedConnection};
use crate::store::StoreError;
use crate::store::redis::script::{Call, Dialect, Library, Recovery};

/// Recoveries one call may make: a load, then a change of dialect and its load. A server that
/// still lacks what was loaded answers the call's error.
const MAX_RECOVERIES: usize = 3;

impl SharedConnection {
    /// Sends `call`, keeping the connection's health record: as `FCALL` while the server has
    /// functions (and the store uses them), else as `EVALSHA`; a function not found loads the
    /// library (`FUNCTION LOAD REPLACE`, on every primary of a cluster), `NOSCRIPT` the script,
    /// and the call goes again; a server that does not know `FCALL`, or refuses to load the
    /// library (an ACL without `FUNCTION LOAD`), switches the store to scripts until its
    /// connection is replaced.
    pub(in crate::store::redis) async fn call<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        call: &Call,
    ) -> Result<T, StoreError> {
        let mut checkout = self.get().await?;
        self.call_on(&mut checkout, call).await
    }

    /// Sends `call` as [`call`](Self::call) does, then `WAIT replicas timeout` on the same
    /// connection: WAIT counts the replicas that hold this connection's writes, so it must
    /// follow them on the connection that made them. Both go in one pipeline (one round trip),
    /// and each reply is read on its own: an error reply of the call (a ledger not declared, a
    /// script's error) is its answer in that round trip, never a reason to send it again. Only a
    /// call that needs the library or its script loaded first is sent again, alone, then WAIT.
    /// Returns the call's reply and how many replicas acknowledged it.
    #[cfg(feature = "regions")]
    pub(in crate::store::redis) async fn call_and_wait<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        call: &Call,
        replicas: u32,
        timeout: std::time::Duration,
    ) -> Result<(T, u32), StoreError> {
        let mut checkout = self.get().await?;
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(
            u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        let dialect = self.dialect();
        let mut pipeline = redis::pipe();
        pipeline
            .add_command(call.command(dialect).into_owned())
            .add_command(wait.clone())
            .ignore_errors();
        checkout.health.sending(self.now_ms());
        let both = pipeline
            .query_async::<(redis::RedisResult<T>, redis::RedisResult<u32>)>(
                &mut checkout.connection,
            )
            .await;
        let (reply, acknowledged) = self.settle(&checkout, both)?;
        match reply {
            Ok(reply) => Ok((reply, self.settle(&checkout, acknowledged)?)),
            Err(err) if matches!(call.recovery(dialect, &err), Recovery::None) => {
                Err(self.failed(&checkout, err))
            }
            Err(_) => {
                let reply = self.call_on(&mut checkout, call).await?;
                checkout.health.sending(self.now_ms());
                let acknowledged = wait.query_async::<u32>(&mut checkout.connection).await;
                Ok((reply, self.settle(&checkout, acknowledged)?))
            }
        }
    }

    async fn call_on<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        checkout: &mut Checkout,
        call: &Call,
    ) -> Result<T, StoreError> {
        let mut recoveries = 0;
        loop {
            let dialect = self.dialect();
            checkout.health.sending(self.now_ms());
            let err = match call
                .command(dialect)
                .query_async::<T>(&mut checkout.connection)
                .await
            {
                Ok(reply) => return self.settle(checkout, Ok(reply)),
                Err(err) => err,
            };
            if recoveries == MAX_RECOVERIES {
                return self.settle(checkout, Err(err));
            }
            recoveries += 1;
            match call.recovery(dialect, &err) {
                Recovery::Load(load) => {
                    let loaded = load
                        .query_async::<redis::Value>(&mut checkout.connection)
                        .await;
                    // A server that refuses the library (an ACL without `FUNCTION LOAD`) is sent
                    // scripts instead; a connection that broke is the call's error.
                    if let Err(refused) = &loaded
                        && dialect == Dialect::Functions
                        && !super::breaks_connection(refused)
                    {
                        tracing::warn!(
                            error = %refused,
                            "the Redis server refused the rate-limit function library: the store \
                             calls scripts (EVALSHA) until its connection is replaced"
                        );
                        checkout.health.answered();
                        self.set_dialect(Dialect::Scripts);
                        continue;
                    }
                    self.settle(checkout, loaded)?;
                    tracing::debug!(
                        ?dialect,
                        library = Library::get().name,
                        "loaded the rate-limit scripts into Redis"
                    );
                }
                Recovery::Scripts => {
                    tracing::info!(
                        "the Redis server does not know FCALL (Redis 6.2?): the store calls \
                         scripts (EVALSHA) until its connection is replaced"
                    );
                    self.set_dialect(Dialect::Scripts);
                }
                Recovery::None => return self.settle(checkout, Err(err)),
            }
        }
    }

    /// How calls are sent now.
    pub(in crate::store::redis) fn dialect(&self) -> Dialect {
        match self.dialect.load(Ordering::Relaxed) {
            0 => Dialect::Functions,
            _ => Dialect::Scripts,
        }
    }

    pub(super) fn set_dialect(&self, dialect: Dialect) {
        self.dialect.store(dialect_code(dialect), Ordering::Relaxed);
    }
}

/// The dialect as the connection keeps it.
pub(super) fn dialect_code(dialect: Dialect) -> u8 {
    match dialect {
        Dialect::Functions => 0,
        Dialect::Scripts => 1,
    }
}
