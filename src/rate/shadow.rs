//! Shadow mode: a rate limit that decides, counts, logs and writes its headers, but never
//! refuses; for rolling a new limit out safely, per layer or for many layers at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::decision::Decision;
use crate::log::Throttled;

/// A shadow-mode switch shared by many layers: every layer given a clone of it
/// ([`RateLimitLayerBuilder::shadow_switch`](crate::rate::RateLimitLayerBuilder::shadow_switch))
/// is in shadow while it is on, whatever its own setting. One switch for a whole service turns
/// all its limits into observers at run time (an incident, a first deployment of a set of
/// limits), and back.
///
/// ```
/// use tower_redis_ratelimit::rate::ShadowSwitch;
///
/// let switch = ShadowSwitch::new(true);
/// // RateLimitLayer::builder()...shadow_switch(switch.clone())... for every layer, then:
/// switch.set(false); // enforce
/// assert!(!switch.is_on());
/// ```
#[derive(Clone, Debug, Default)]
pub struct ShadowSwitch(Arc<AtomicBool>);

impl ShadowSwitch {
    /// A switch, on or off.
    pub fn new(on: bool) -> Self {
        Self(Arc::new(AtomicBool::new(on)))
    }

    /// Turns shadow mode on or off for every layer sharing this switch.
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }

    /// Whether the switch is on.
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A layer's shadow setting, and the log of the refusals it did not make.
pub(crate) struct Shadow {
    enabled: bool,
    switch: Option<ShadowSwitch>,
    log: Throttled,
}

impl Shadow {
    pub(crate) fn new(enabled: bool, switch: Option<ShadowSwitch>) -> Self {
        Self {
            enabled,
            switch,
            log: Throttled::new(Duration::from_secs(1)),
        }
    }

    /// Whether a refusal is to be let through, logging it if so.
    #[inline]
    pub(crate) fn lets_through(&self, decision: &Decision, rule: &str) -> bool {
        if !(self.enabled || self.switch.as_ref().is_some_and(ShadowSwitch::is_on)) {
            return false;
        }
        tracing::debug!(
            rule,
            ?decision,
            "shadow mode: a request this limit refuses passes"
        );
        self.log.warn(|suppressed| {
            tracing::info!(
                rule,
                also = suppressed,
                "shadow mode: a request over the limit passed (and `also` more since the last \
                 such line)"
            );
        });
        true
    }
}
