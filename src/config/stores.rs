//! What a program running the limits (a proxy, a decision service) asks of their stores: whether
//! they answer, and limits of its own counted in them.

use std::collections::BTreeMap;
use std::sync::Arc;

#[cfg(feature = "concurrency")]
use super::ConcurrencyConfig;
use super::store::BuiltStore;
use super::{Built, Limits};
#[cfg(feature = "concurrency")]
use crate::concurrency::ConcurrencyLimitLayer;
use crate::error::ConfigError;
use crate::store::{Store, StoreError};

/// The name [`Limits::ping_stores`] gives the in-process store of a file that names no store.
pub const IN_PROCESS_STORE: &str = "in-process";

impl Limits {
    /// Asks every store whether it answers: a Redis store is sent a `PING` (connecting first if
    /// it has no connection), an in-process one always answers; a store that knows it cannot
    /// decide ([`Store::unready`], e.g. a region store whose ledger is not declared) answers
    /// why. Each store's name (the file's,
    /// or [`IN_PROCESS_STORE`]) with its answer, the stores asked at once. Bound the call with
    /// a timeout of your own: a store that cannot connect answers within its connect timeout,
    /// one that hangs may not.
    pub async fn ping_stores(&self) -> Vec<(String, Result<(), StoreError>)> {
        let mut answers = Vec::with_capacity(self.stores.len() + 1);
        if self.in_process.is_some() {
            answers.push((IN_PROCESS_STORE.to_owned(), Ok(())));
        }
        #[cfg(feature = "redis")]
        {
            let pings = self.stores.iter().map(|(name, (_, built))| async move {
                let answer = match &built.redis {
                    Some(redis) => redis.ping().await,
                    None => Ok(()),
                }
                .and_then(|()| match built.rate.unready() {
                    Some(why) => Err(StoreError::error_reply(why)),
                    None => Ok(()),
                });
                (name.clone(), answer)
            });
            answers.extend(futures_util::future::join_all(pings).await);
        }
        #[cfg(not(feature = "redis"))]
        answers.extend(self.stores.keys().map(|name| (name.clone(), Ok(()))));
        answers
    }

    /// A concurrency limit of the caller's own, named `name` (its errors named from `field`),
    /// counted in one of these limits' stores: its `store`, or the default one. Its `paths` are
    /// not used. Built again from the limits of each reload ([`LimitsConfig::rebuild`](super::LimitsConfig::rebuild)),
    /// it goes on counting the permits held under the previous ones, as long as its store is
    /// kept: a reload does not free the slots of requests (or tunnels) still open.
    #[cfg(feature = "concurrency")]
    #[cfg_attr(docsrs, doc(cfg(feature = "concurrency")))]
    pub fn concurrency_limit(
        &self,
        name: &str,
        field: &str,
        config: &ConcurrencyConfig,
    ) -> Result<ConcurrencyLimitLayer, ConfigError> {
        let default_store = self.default_store();
        let policies = BTreeMap::new();
        let built = self.built(&policies, default_store.as_ref());
        let store = built.store(field, config.store.as_ref())?;
        config.build(name, field, store)
    }

    /// The store named `name` among these limits' stores, or the default one (the only store,
    /// or the in-process store of a file that names none), for a caller that decides with it
    /// itself (the gateway's Envoy rate limit service). A name that is not a store, or no name
    /// where the file has several stores, is an error at `field`. It is the same store the
    /// routes count in: built again from the limits of a reload
    /// ([`LimitsConfig::rebuild`](super::LimitsConfig::rebuild)), it keeps its counts as long
    /// as its settings are unchanged.
    pub fn rate_store(
        &self,
        field: &str,
        name: Option<&str>,
    ) -> Result<Arc<dyn Store>, ConfigError> {
        Ok(self.named_store(field, name)?.rate)
    }

    /// The Redis store named `name` among these limits' stores, or the default one, as
    /// [`rate_store`](Self::rate_store) finds it; `None` when it is not a Redis store (the
    /// in-process one). For a caller that keeps state of its own in it (the gateway's Envoy
    /// quota service, its shares).
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis_store(
        &self,
        field: &str,
        name: Option<&str>,
    ) -> Result<Option<crate::store::RedisStore>, ConfigError> {
        Ok(self.named_store(field, name)?.redis)
    }

    fn named_store(&self, field: &str, name: Option<&str>) -> Result<BuiltStore, ConfigError> {
        let default_store = self.default_store();
        let policies = BTreeMap::new();
        let built = self.built(&policies, default_store.as_ref());
        let name = name.map(str::to_owned);
        built.store(field, name.as_ref()).cloned()
    }

    /// The store of a route, a limit or a caller that names none.
    fn default_store(&self) -> Option<BuiltStore> {
        match self.stores.len() {
            0 => self.in_process.clone(),
            1 => self.stores.values().next().map(|(_, built)| built.clone()),
            _ => None,
        }
    }

    fn built<'a>(
        &'a self,
        policies: &'a BTreeMap<String, crate::policy::Policy>,
        default_store: Option<&'a BuiltStore>,
    ) -> Built<'a> {
        Built {
            stores: &self.stores,
            policies,
            default_store,
        }
    }
}
