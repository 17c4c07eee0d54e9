//! Shadow mode: a rate limit that decides and counts, but refuses nothing and, unless asked,
//! tells the client nothing; for rolling a new limit out safely. Every layer has one switch, its
//! own or shared with other layers, that moves it from shadow to enforcement and back at run time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::decision::Decision;
use crate::log::Throttled;

/// The shadow-mode switch of one or more rate limits: while it is on they are in shadow mode,
/// while it is off they enforce. It goes both ways at run time, without a restart.
///
/// Every [`RateLimitLayer`](crate::RateLimitLayer) has exactly one switch:
/// [`RateLimitLayer::shadow_switch`](crate::RateLimitLayer::shadow_switch) returns it. A layer
/// makes its own, on or off, with [`shadow`](crate::rate::RateLimitLayerBuilder::shadow) (off by
/// default), or takes a clone of a switch it shares with other layers with
/// [`shadow_switch`](crate::rate::RateLimitLayerBuilder::shadow_switch): one switch for a whole
/// service turns all its limits into observers at once (an incident, a first deployment of a set
/// of limits), and back. A layer in shadow mode never changes what a client does: it refuses
/// nothing (not even for a missing key, a denied key or a failed store), writes no rate-limit
/// header unless told to ([`shadow_headers`](crate::rate::RateLimitLayerBuilder::shadow_headers)),
/// and reports what it would have done in metrics and logs.
///
/// ```
/// use tower_redis_ratelimit::key::HeaderKey;
/// use tower_redis_ratelimit::rate::ShadowSwitch;
/// use tower_redis_ratelimit::{Quota, RateLimitLayer, Rule};
///
/// // A new limit, rolled out in shadow mode...
/// let layer = RateLimitLayer::builder()
///     .rule(Rule::gcra("search", Quota::per_minute(30)))
///     .key(HeaderKey::new("x-api-key"))
///     .shadow(true)
///     .build()?;
/// // ... enforced once its metrics look right, and back to shadow if it misbehaves.
/// layer.shadow_switch().set(false);
/// assert!(!layer.shadow_switch().is_on());
///
/// // One switch for many layers.
/// let all = ShadowSwitch::new(true);
/// let first = RateLimitLayer::builder()
///     .rule(Rule::gcra("first", Quota::per_minute(30)))
///     .key(HeaderKey::new("x-api-key"))
///     .shadow_switch(all.clone())
///     .build()?;
/// all.set(false); // every layer built with a clone of `all` enforces
/// assert!(!first.shadow_switch().is_on());
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ShadowSwitch(Arc<AtomicBool>);

impl ShadowSwitch {
    /// A switch, on (shadow mode) or off (enforcing).
    pub fn new(on: bool) -> Self {
        Self(Arc::new(AtomicBool::new(on)))
    }

    /// Puts every layer sharing this switch in shadow mode (`true`) or makes them enforce
    /// (`false`), from their next decision on.
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }

    /// Whether the switch is on: the layers sharing it are in shadow mode.
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A layer's shadow switch, whether it tells the client what it decided in shadow, and the log of
/// the refusals it did not make.
pub(crate) struct Shadow {
    switch: ShadowSwitch,
    headers: bool,
    log: Throttled,
}

impl Shadow {
    pub(crate) fn new(switch: ShadowSwitch, headers: bool) -> Self {
        Self {
            switch,
            headers,
            log: Throttled::new(Duration::from_secs(1)),
        }
    }

    /// Whether the layer is in shadow mode now.
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        self.switch.is_on()
    }

    pub(crate) fn switch(&self) -> &ShadowSwitch {
        &self.switch
    }

    /// Whether a shadow decision is told in the `Rate-Limiting-*` headers, as a `Shadow-` state.
    #[inline]
    pub(crate) fn tells(&self) -> bool {
        self.headers
    }

    /// Logs a refusal of `rule` that shadow mode let through: every one at `debug`, and at most
    /// once a second at `info` with a count of the others.
    pub(crate) fn let_through(&self, decision: &Decision, rule: &str) {
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
    }
}
