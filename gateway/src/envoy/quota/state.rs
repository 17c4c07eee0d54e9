//! What the streams of one quota service share: the rules in force (replaced by a reload),
//! the shares, and this instance's name for its Envoys.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::rules::Rules;
use super::shares::Shares;

/// What the streams share: the rules in force and the shares.
pub(super) struct Inner {
    rules: RwLock<Arc<Rules>>,
    /// Counts reloads: a stream settles its buckets again when it changes.
    generation: AtomicU64,
    pub(super) shares: Arc<dyn Shares>,
    /// This instance, in its Envoys' names among the shares.
    instance: String,
    streams: AtomicU64,
}

impl Inner {
    pub(super) fn new(rules: Rules, shares: Arc<dyn Shares>) -> Self {
        Self {
            rules: RwLock::new(Arc::new(rules)),
            generation: AtomicU64::new(1),
            shares,
            instance: format!("{:016x}", fastrand::u64(..)),
            streams: AtomicU64::new(0),
        }
    }

    /// The rules in force.
    pub(super) fn rules(&self) -> Arc<Rules> {
        Arc::clone(
            &self
                .rules
                .read()
                .unwrap_or_else(|poison| poison.into_inner()),
        )
    }

    /// Counts reloads.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Puts `rules` in force: every stream settles its buckets under them at its next tick.
    pub(super) fn replace_rules(&self, rules: Arc<Rules>) {
        *self
            .rules
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = rules;
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The name of a new stream's Envoy among the shares: this instance's, and a number.
    pub(super) fn next_holder(&self) -> String {
        let number = self.streams.fetch_add(1, Ordering::Relaxed);
        format!("{}:{number}", self.instance)
    }
}
