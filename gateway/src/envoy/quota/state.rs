//! What the streams of one quota service share: the rules in force with the store of each
//! domain's shares (replaced by a reload), the shares kept in this process, and this
//! instance's name for its Envoys.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use tower_redis_ratelimit::config::Limits;

use super::rules::{Found, Rules};
use super::shares::{InProcessShares, RedisShares, Shares};
use crate::config::EnvoyFilesError;

/// What the streams share.
pub(super) struct Inner {
    in_force: RwLock<Arc<InForce>>,
    /// Counts reloads: a stream settles its buckets again when it changes.
    generation: AtomicU64,
    /// The shares of the domains whose store is the in-process one: kept across reloads.
    in_process: Arc<InProcessShares>,
    /// This instance, in its Envoys' names among the shares.
    instance: String,
    streams: AtomicU64,
    /// Turned on when the process drains: every stream ends (its Envoy reconnects elsewhere,
    /// keeping its assignments until they expire), so that a drain does not wait for streams
    /// that never end by themselves.
    closing: watch::Sender<bool>,
}

/// The rules of one load, and the Redis shares of the domains whose store is a Redis one.
pub(super) struct InForce {
    rules: Rules,
    redis: HashMap<String, Arc<RedisShares>>,
}

impl InForce {
    /// The rules, each domain's shares in the store its file names (`extensions.store`).
    pub(super) fn new(rules: Rules, limits: &Limits) -> Result<Self, EnvoyFilesError> {
        let mut redis = HashMap::new();
        for (domain, store, file) in rules.stores() {
            let found = limits.redis_store("extensions", store).map_err(|error| {
                EnvoyFilesError::Store {
                    path: file.to_owned(),
                    error,
                }
            })?;
            if let Some(store) = found {
                redis.insert(domain.to_owned(), Arc::new(RedisShares::new(store)));
            }
        }
        Ok(Self { rules, redis })
    }

    pub(super) fn rules(&self) -> &Rules {
        &self.rules
    }

    /// What `bucket` of `domain` gets; `None` when no file has the domain.
    pub(super) fn find(&self, domain: &str, bucket: &HashMap<String, String>) -> Option<Found> {
        self.rules.find(domain, bucket)
    }
}

impl Inner {
    pub(super) fn new(in_force: InForce) -> Self {
        Self {
            in_force: RwLock::new(Arc::new(in_force)),
            generation: AtomicU64::new(1),
            in_process: Arc::new(InProcessShares::new()),
            instance: format!("{:016x}", fastrand::u64(..)),
            streams: AtomicU64::new(0),
            closing: watch::Sender::new(false),
        }
    }

    /// Ends every stream, now and from now on.
    pub(super) fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once the streams are to end.
    pub(super) fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut closing = self.closing.subscribe();
        async move {
            if closing.wait_for(|closed| *closed).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The rules in force.
    pub(super) fn in_force(&self) -> Arc<InForce> {
        Arc::clone(
            &self
                .in_force
                .read()
                .unwrap_or_else(|poison| poison.into_inner()),
        )
    }

    /// Where `domain`'s shares are kept now.
    pub(super) fn shares(&self, domain: &str) -> Arc<dyn Shares> {
        match self.in_force().redis.get(domain) {
            Some(redis) => Arc::clone(redis) as Arc<dyn Shares>,
            None => Arc::clone(&self.in_process) as Arc<dyn Shares>,
        }
    }

    /// Counts reloads.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Puts `in_force` in force: every stream settles its buckets under it at its next tick.
    pub(super) fn replace(&self, in_force: Arc<InForce>) {
        *self
            .in_force
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = in_force;
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.in_process.sweep();
    }

    /// The name of a new stream's Envoy among the shares: this instance's, and a number.
    pub(super) fn next_holder(&self) -> String {
        let number = self.streams.fetch_add(1, Ordering::Relaxed);
        format!("{}:{number}", self.instance)
    }
}
