//! [`StoreError`]: why a store could not answer.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

/// Why a store could not answer. The layer turns it into its failure mode (fail open by default).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store did not answer within the layer's deadline.
    #[error("the rate-limit store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store cannot be reached (connection refused, reconnecting after a failure).
    #[error("the rate-limit store is unreachable: {0}")]
    Unavailable(#[source] SharedError),
    /// The store answered with an error.
    #[error("the rate-limit store failed: {0}")]
    Backend(#[source] SharedError),
    /// The store answered something this crate does not understand (a script of another version?).
    #[error("the rate-limit store sent an unexpected reply: {0}")]
    Protocol(String),
}

impl StoreError {
    #[cfg(feature = "redis")]
    pub(crate) fn unavailable(err: impl StdError + Send + Sync + 'static) -> Self {
        StoreError::Unavailable(SharedError(Arc::new(err)))
    }

    #[cfg(any(feature = "redis", feature = "concurrency"))]
    pub(crate) fn backend(err: impl StdError + Send + Sync + 'static) -> Self {
        StoreError::Backend(SharedError(Arc::new(err)))
    }

    /// Whether the call surely never reached the store: no connection could be made, or the
    /// store is waiting out its backoff after failing to make one, so no command was sent and
    /// there is nothing to undo. A timeout or a connection lost mid-call may have delivered it.
    #[cfg(feature = "concurrency")]
    pub(crate) fn never_sent(&self) -> bool {
        // Only a failed connection attempt yields a pool error (`store::redis::connection`);
        // a command that was sent fails with a `RedisError`.
        #[cfg(feature = "redis")]
        if let StoreError::Unavailable(SharedError(err)) = self {
            return err.is::<deadpool_redis::PoolError>();
        }
        false
    }
}

/// An error shared between every request that saw it (one failed reconnect answers many waiters).
#[derive(Debug, Clone)]
pub struct SharedError(Arc<dyn StdError + Send + Sync>);

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for SharedError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}
