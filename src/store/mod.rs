//! Where limits are counted: the [`Store`] and [`PermitStore`](permits::PermitStore) traits and their
//! implementations.
//!
//! - [`MemoryStore`]: in process, the embedded default. Exact, fast, one process only.
//! - `RedisStore` (feature `redis`, on by default): shared by every replica through Redis; every
//!   decision is one atomic Lua call.
//!
//! - `region::RegionStore` (feature `regions`): a region's Redis store that decides global
//!   policies from allotments of one worldwide quota; see `region`.
//!
//! Both of the first two also hold concurrency permits (feature `concurrency`): see [`permits`].
//!
//! A store answers with a [`StoreFuture`], which is either already resolved (the memory store:
//! no allocation, no timer) or a boxed future (the Redis store). The layer bounds the wait with
//! its deadline and turns a [`StoreError`] into its failure mode.

mod error;
mod future;
mod key;
mod memory;
#[cfg(feature = "concurrency")]
#[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
pub mod permits;
mod rate;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "regions")]
#[cfg_attr(docsrs, doc(cfg(feature = "regions")))]
pub mod region;

pub use self::error::{StoreError, StoreErrorKind};
pub use self::future::StoreFuture;
pub use self::memory::{MemoryStore, MemoryStoreBuilder};
pub use self::rate::Store;
#[cfg(feature = "sentinel")]
pub use self::redis::RedisAuth;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::{Fallback, QuotaLeases, RedisStore, RedisStoreBuilder};
