//! What a store that wraps a [`RedisStore`] from outside `store::redis` (the region module's
//! `RegionStore` and ledger) calls through it: its own entry points of `lua/`, as [`Call`]s on
//! the store's one shared connection, with the library or script loaded as needed.

use std::time::Duration;

use super::RedisStore;
use super::script::Call;
use crate::store::StoreError;

impl RedisStore {
    /// Sends `call` on this store's connection.
    pub(crate) async fn run<T: redis::FromRedisValue>(&self, call: &Call) -> Result<T, StoreError> {
        self.inner.connection.call(call).await
    }

    /// Sends `call`, then waits for `replicas` replicas to acknowledge it, for at most `timeout`;
    /// returns the reply and how many did.
    pub(crate) async fn run_and_wait<T: redis::FromRedisValue>(
        &self,
        call: &Call,
        replicas: u32,
        timeout: Duration,
    ) -> Result<(T, u32), StoreError> {
        self.inner
            .connection
            .call_and_wait(call, replicas, timeout)
            .await
    }

    /// The prefix of this store's keys.
    pub(crate) fn prefix(&self) -> &str {
        &self.inner.prefix
    }
}
