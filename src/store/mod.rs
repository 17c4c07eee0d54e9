//! Where limits are counted: the [`Store`] and [`LeaseStore`](lease::LeaseStore) traits and their
//! implementations.
//!
//! - [`MemoryStore`]: in process, the embedded default. Exact, fast, one process only.
//! - `RedisStore` (feature `redis`, on by default): shared by every replica through Redis; every
//!   decision is one atomic Lua call.
//!
//! Both also lease concurrency permits (feature `concurrency`): see [`lease`].
//!
//! A store answers with a [`StoreFuture`], which is either already resolved (the memory store:
//! no allocation, no timer) or a boxed future (the Redis store). The layer bounds the wait with
//! its deadline and turns a [`StoreError`] into its failure mode.

#[cfg(feature = "redis")]
mod denials;
mod error;
mod future;
mod key;
#[cfg(feature = "concurrency")]
#[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
pub mod lease;
mod memory;
mod rate;
#[cfg(feature = "redis")]
mod redis;

pub use self::error::{SharedError, StoreError};
pub use self::future::StoreFuture;
pub use self::memory::{MemoryStore, MemoryStoreBuilder};
pub use self::rate::Store;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::{Fallback, QuotaLeases, RedisStore, RedisStoreBuilder};
