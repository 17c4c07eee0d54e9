//! The fleet usage load shedder (seed 004): one global concurrency slot for the whole fleet, each
//! priority allowed to fill it only up to its share.
//!
//! Every request of every server takes a permit from one slot whose capacity is what the fleet
//! can serve at once. A request of priority `p` is admitted only while fewer than
//! `capacity × share(p)` permits are held, checked and taken in one atomic store call (the share
//! is an argument of the same script the concurrency limit uses). With the default shares
//! (low 50 %, normal 80 %, high 90 %, critical 100 %), low-priority traffic is shed first once
//! the fleet is half busy, normal traffic at 80 %, high at 90 %, and the last 10 % stays reserved
//! for critical requests. Shed requests get `503 Service Unavailable` with `Retry-After`.
//!
//! The capacity is a hard bound, for critical requests too: once every permit is held, a critical
//! request is refused as well, since admitting it would load the fleet past what it can serve,
//! which is what the shedder exists to prevent. Critical requests are the last refused, not never
//! refused (the utilisation shedder, which has no hard bound, never refuses them).

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use tower_layer::Layer;

use crate::concurrency::{
    Admission, ConcurrencyLimit, ConcurrencyLimitLayer, ConcurrencyLimitLayerBuilder,
};
use crate::error::ConfigError;
use crate::headers::Headers;
use crate::key::GlobalKey;
use crate::layer::FailureMode;
use crate::store::Store;

use super::priority::{Classify, Priority, priority_of};

/// The fleet's capacity, each priority's threshold, and the classifier.
pub(crate) struct FleetShares {
    capacity: u32,
    /// Permits each priority may share, by `Priority::index`.
    limits: [u32; 4],
    classify: Arc<dyn Classify>,
}

impl FleetShares {
    /// The request's priority: the one an outer layer (a utilisation shedder, say) already
    /// decided, else the classifier's, which is then recorded in the extensions, so every layer
    /// of a stack and the handler see the same answer.
    pub(crate) fn classify(&self, parts: &mut Parts) -> Priority {
        priority_of(parts, &*self.classify)
    }

    /// Admit a request of `priority` only while fewer permits than this are held.
    pub(crate) fn limit(&self, priority: Priority) -> u32 {
        self.limits[priority.index()]
    }

    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }
}

/// A tower [`Layer`] that sheds lower-priority requests once the whole fleet is busy.
///
/// A request of each priority is admitted while fewer permits than its share of the capacity are
/// held; [`Priority::Critical`] (share 100 % by default) is refused only when the whole capacity
/// is in use. The priority is recorded in the request extensions, where inner layers and the
/// handler find it (`Extension<Priority>`).
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use tower_redis_ratelimit::shed::{FleetShedLayer, Priority};
///
/// let shed = FleetShedLayer::builder()
///     .capacity(1_000)
///     .share(Priority::Low, 40)
///     .classify(|parts| {
///         if parts.uri.path().starts_with("/charges") {
///             Priority::Critical
///         } else if parts.uri.path().starts_with("/analytics") {
///             Priority::Low
///         } else {
///             Priority::Normal
///         }
///     })
///     .build()?;
/// let app: Router = Router::new().route("/charges", get(|| async { "ok" })).layer(shed);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct FleetShedLayer {
    inner: ConcurrencyLimitLayer,
}

impl FleetShedLayer {
    /// A builder for a shedder.
    pub fn builder() -> FleetShedLayerBuilder {
        FleetShedLayerBuilder {
            base: ConcurrencyLimitLayer::builder()
                .name("fleet")
                .headers(Headers::NONE),
            capacity: None,
            shares: [50, 80, 90, 100],
            classify: None,
        }
    }
}

impl<S> Layer<S> for FleetShedLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> ConcurrencyLimit<S> {
        self.inner.layer(inner)
    }
}

/// Configures a [`FleetShedLayer`]. Required: the [`capacity`](Self::capacity).
#[must_use]
pub struct FleetShedLayerBuilder {
    base: ConcurrencyLimitLayerBuilder,
    capacity: Option<u32>,
    shares: [u8; 4],
    classify: Option<Arc<dyn Classify>>,
}

impl FleetShedLayerBuilder {
    /// The name of the global slot (default `fleet`): servers sharing a store and this name form
    /// one fleet.
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.base = self.base.name(name);
        self
    }

    /// How many requests the whole fleet serves at once (at least 1).
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The percentage of the capacity that requests of `priority` may fill (1 to 100). Defaults:
    /// low 50, normal 80, high 90, critical 100. A more important priority never gets a smaller
    /// share than a less important one. No share exceeds the capacity: at 100 % in use, every
    /// request is refused, critical ones included.
    pub fn share(mut self, priority: Priority, percent: u8) -> Self {
        self.shares[priority.index()] = percent;
        self
    }

    /// How each request's priority is decided from its head (default: every request is
    /// [`Priority::Normal`]). A priority already in the request extensions (put there by an outer
    /// shedder or an authentication layer) is used instead; the one decided is recorded there.
    pub fn classify(
        mut self,
        classify: impl Fn(&Parts) -> Priority + Send + Sync + 'static,
    ) -> Self {
        self.classify = Some(Arc::new(classify));
        self
    }

    /// Where the fleet's permits are held: a [`RedisStore`](crate::RedisStore) shared by every
    /// server (default: an in-process store, which sheds for this server alone).
    pub fn store(mut self, store: impl Store) -> Self {
        self.base = self.base.store(store);
        self
    }

    /// How long a crashed server's permits keep counting (default 30 s); see
    /// [`ConcurrencyLimitLayerBuilder::lease`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.base = self.base.lease(lease);
        self
    }

    /// How often live permits are renewed (default: a third of the lease).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.base = self.base.renew_every(every);
        self
    }

    /// What to do when the store fails (default [`FailureMode::Open`]: shed nothing).
    pub fn failure_mode(mut self, failure: FailureMode) -> Self {
        self.base = self.base.failure_mode(failure);
        self
    }

    /// How long to wait for the store (default 100 ms).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.base = self.base.deadline(deadline);
        self
    }

    /// Which rate-limit headers to write (default [`Headers::NONE`]: a shed 503 carries only
    /// `Retry-After`).
    pub fn headers(mut self, headers: Headers) -> Self {
        self.base = self.base.headers(headers);
        self
    }

    /// The `Retry-After` sent with a 503 (default 1 s).
    pub fn retry_after(mut self, hint: Duration) -> Self {
        self.base = self.base.retry_after(hint);
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(self) -> Result<FleetShedLayer, ConfigError> {
        let capacity = match self.capacity {
            Some(0) | None => {
                return Err(ConfigError::Concurrency(
                    "a fleet shedder needs `.capacity(n)` with n >= 1".into(),
                ));
            }
            Some(capacity) => capacity,
        };
        let mut limits = [0; 4];
        for priority in Priority::ALL {
            let percent = self.shares[priority.index()];
            if !(1..=100).contains(&percent) {
                return Err(ConfigError::Concurrency(format!(
                    "the {priority} share is {percent}%: use 1 to 100"
                )));
            }
            // Floor, so a share never admits more than it says; at least one permit.
            limits[priority.index()] =
                ((u64::from(capacity) * u64::from(percent) / 100) as u32).max(1);
        }
        if self.shares.windows(2).any(|pair| pair[0] > pair[1]) {
            let [low, normal, high, critical] = self.shares;
            return Err(ConfigError::Concurrency(format!(
                "shares must not grow as priority falls: \
                 low {low}%, normal {normal}%, high {high}%, critical {critical}%"
            )));
        }
        let shares = FleetShares {
            capacity,
            limits,
            classify: self.classify.unwrap_or_else(|| Arc::new(Priority::Normal)),
        };
        let config = self
            .base
            .config(Admission::Fleet(shares), Arc::new(GlobalKey::new("fleet")))?;
        Ok(FleetShedLayer {
            inner: ConcurrencyLimitLayer::from_config(config),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(layer: &FleetShedLayer) -> [u32; 4] {
        match layer.inner.admission() {
            Admission::Fleet(shares) => shares.limits,
            Admission::PerKey { .. } => unreachable!("a fleet shedder"),
        }
    }

    #[test]
    fn shares_become_thresholds_rounded_down_but_never_zero() {
        let layer = FleetShedLayer::builder().capacity(10).build().unwrap();
        assert_eq!(shares(&layer), [5, 8, 9, 10]);
        let small = FleetShedLayer::builder().capacity(1).build().unwrap();
        assert_eq!(shares(&small), [1, 1, 1, 1]);
        let odd = FleetShedLayer::builder()
            .capacity(7)
            .share(Priority::Normal, 75)
            .build()
            .unwrap();
        assert_eq!(shares(&odd), [3, 5, 6, 7]);
    }

    #[test]
    fn bad_shares_and_capacities_are_configuration_errors() {
        assert!(FleetShedLayer::builder().build().is_err());
        assert!(FleetShedLayer::builder().capacity(0).build().is_err());
        let zero = FleetShedLayer::builder()
            .capacity(10)
            .share(Priority::Low, 0);
        assert!(zero.build().is_err());
        let inverted = FleetShedLayer::builder()
            .capacity(10)
            .share(Priority::Low, 90);
        assert!(matches!(inverted.build(), Err(ConfigError::Concurrency(_))));
    }
}
