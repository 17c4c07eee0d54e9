//! What a store that wraps a [`RedisStore`] from outside `store::redis` (the region module's
//! `RegionStore` and ledger) uses of it, and nothing more: its own entry points of `lua/`, sent
//! as [`Call`]s on the store's one shared connection (the library or script loaded as needed),
//! the store's key prefix, the storage form of client keys ([`StorageKey`]) and the state names
//! of a policy's rules ([`Names`], found in the store's table of them).

use std::time::Duration;

use super::RedisStore;
pub(in crate::store) use super::key::StorageKey;
pub(in crate::store) use super::key::names::Names;
#[cfg(test)]
pub(in crate::store) use super::key::names::names;
pub(in crate::store) use super::script::{Call, Entry};
use crate::policy::Policy;
use crate::store::StoreError;

impl RedisStore {
    /// Sends `call` on this store's connection.
    pub(in crate::store) async fn run<T: redis::FromRedisValue>(
        &self,
        call: &Call,
    ) -> Result<T, StoreError> {
        self.inner.connection.call(call).await
    }

    /// Runs one plain command on this store's connection (an operator's reading: `SCAN`,
    /// `HGETALL`).
    pub(in crate::store) async fn query<T: redis::FromRedisValue>(
        &self,
        command: &redis::Cmd,
    ) -> Result<T, StoreError> {
        self.inner.connection.query(command).await
    }

    /// Sends `call`, then waits for `replicas` replicas to acknowledge it, for at most `timeout`;
    /// returns the reply and how many did.
    pub(in crate::store) async fn run_and_wait<T: redis::FromRedisValue>(
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

    /// The state names of `policy`'s rules, in rule order, from this store's table of them.
    pub(in crate::store) fn state_names(&self, policy: &Policy) -> Names {
        self.inner.names.of(policy)
    }

    /// The prefix of this store's keys.
    pub(in crate::store) fn prefix(&self) -> &str {
        &self.inner.prefix
    }
}
