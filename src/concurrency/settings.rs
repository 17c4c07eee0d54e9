//! What every concurrency limit has, the per-key limit and the fleet shedder alike (the slot's
//! name, the store of its permits, and their TTL), and the `Retry-After` hint that the
//! concurrency limits and both load shedders send: the settings and the builder methods that
//! fill them, as macros each builder invokes (see `admission::settings`).

use std::sync::Arc;
use std::time::Duration;

use super::limiter::ConcurrencyLimiter;
use super::slot_limit::SlotLimit;
use crate::error::{ConcurrencyConfigError, ConfigError};
use crate::policy::validate_name;
use crate::store::MemoryStore;
use crate::store::permits::{PermitStore, PermitTtl};

/// What every concurrency limit has, the per-key limit and the fleet shedder alike: the slot's
/// name, the store of its permits, and their TTL.
pub(crate) struct SlotSettings {
    pub(crate) name: Option<Arc<str>>,
    pub(crate) store: Option<Arc<dyn PermitStore>>,
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
}

impl SlotSettings {
    /// The defaults: a 30 s TTL renewed every 10 s.
    pub(crate) fn new(name: Option<&str>) -> Self {
        Self {
            name: name.map(Arc::from),
            store: None,
            ttl: Duration::from_secs(30),
            renew_every: None,
        }
    }

    /// The limiter of `limits` with these settings, validated, refusing with `retry_after`.
    pub(crate) fn limiter<L: SlotLimit>(
        self,
        limits: L,
        retry_after: Duration,
    ) -> Result<ConcurrencyLimiter<L>, ConfigError> {
        let name = self.name.ok_or(ConcurrencyConfigError::MissingName)?;
        validate_name(&name)?;
        let mut ttl = PermitTtl::new(self.ttl);
        if let Some(every) = self.renew_every {
            ttl = ttl.with_renewal_every(every);
        }
        ttl.validate()?;
        Ok(ConcurrencyLimiter {
            name,
            store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
            limits,
            ttl,
            retry_after,
        })
    }
}

/// `name`, `store`, `permit_ttl` and `renew_every` for a builder whose `slots` field is a
/// [`SlotSettings`].
macro_rules! slot_settings {
    ($builder:ty) => {
        impl $builder {
            /// The limit's name: in the headers and the storage keys (1 to 64 characters of
            /// `A-Z a-z 0-9 . _ -`). Layers with the same name and store share their slots.
            pub fn name(mut self, name: impl Into<::std::sync::Arc<str>>) -> Self {
                self.slots.name = Some(name.into());
                self
            }

            /// Where permits are held (default: a new [`MemoryStore`](crate::MemoryStore) for
            /// this layer, which limits this server alone). Pass a `RedisStore` to share the
            /// limit between servers.
            pub fn store(mut self, store: impl $crate::store::permits::PermitStore) -> Self {
                self.slots.store = Some(::std::sync::Arc::new(store));
                self
            }

            /// How long a permit survives without renewal (default 30 s, between
            /// [`MIN_PERMIT_TTL`](crate::store::permits::MIN_PERMIT_TTL) and
            /// [`MAX_PERMIT_TTL`](crate::store::permits::MAX_PERMIT_TTL)): the longest a crashed server's
            /// slots stay taken.
            pub fn permit_ttl(mut self, ttl: ::std::time::Duration) -> Self {
                self.slots.ttl = ttl;
                self
            }

            /// How often the store's heartbeat renews live permits (default: a third of the
            /// TTL).
            pub fn renew_every(mut self, every: ::std::time::Duration) -> Self {
                self.slots.renew_every = Some(every);
                self
            }
        }
    };
}

/// `retry_after` for a builder (with a `retry_after` field) of a middleware whose refusals
/// cannot know when a retry would pass; `$default` says its default and why, for the method's documentation.
macro_rules! retry_hint_setting {
    ($builder:ty, $default:literal) => {
        impl $builder {
            /// The `Retry-After` sent with a refusal (rounded up to whole seconds, at least 1).
            #[doc = $default]
            pub fn retry_after(mut self, hint: ::std::time::Duration) -> Self {
                self.retry_after = hint;
                self
            }
        }
    };
}

pub(crate) use {retry_hint_setting, slot_settings};
