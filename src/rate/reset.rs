//! [`RateLimitLayer::reset`]: a client's fresh start under every policy of a layer.

use std::future::Future;

use super::RateLimitLayer;
use crate::key::Key;
use crate::store::{StoreError, StoreFuture};

impl RateLimitLayer {
    /// Resets `key` under every policy of this layer (its default one and each
    /// [plan](super::RateLimitLayerBuilder::plan)'s) in its store, with
    /// [`Store::reset`](crate::Store::reset): the key's next request finds every quota whole,
    /// in every instance sharing the store. For an operator lifting a ban. The policies are
    /// reset one after another; the first error is returned, after every policy was tried.
    ///
    /// A store call like any other, but not bounded by the layer's deadline: bound it with a
    /// timeout of your own.
    ///
    /// ```
    /// use tower_redis_ratelimit::key::{HeaderKey, Key};
    /// use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, Rule, Store};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = MemoryStore::new();
    /// let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(1)))?;
    /// let layer = RateLimitLayer::builder()
    ///     .policy(&policy)
    ///     .key(HeaderKey::new("x-api-key"))
    ///     .store(store.clone())
    ///     .build()?;
    /// let key = Key::from("k-123");
    /// assert!(store.check(&key, &policy, 1).await?.is_allowed());
    /// assert!(!store.check(&key, &policy, 1).await?.is_allowed());
    /// layer.reset(&key).await?;
    /// assert!(store.check(&key, &policy, 1).await?.is_allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub fn reset(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send + use<> {
        let limiter = &self.core.admit;
        let resets: Vec<StoreFuture<()>> = limiter
            .plans
            .policies()
            .map(|policy| limiter.store.reset(key, &policy.policy))
            .collect();
        async move {
            let mut first_error = None;
            for reset in resets {
                if let Err(err) = reset.await {
                    first_error.get_or_insert(err);
                }
            }
            first_error.map_or(Ok(()), Err)
        }
    }
}
