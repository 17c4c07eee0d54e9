//! [`QuotaLeases`]: how much of a key's quota an instance may reserve, and for how long.

use std::time::Duration;

use crate::error::{ConfigError, StoreConfigError};

/// Settings for quota leases, given to [`RedisStoreBuilder::quota_leases`]: local-first
/// decisions for hot keys, at a bounded price in exactness (see there for what they trade).
///
/// ```
/// use std::time::Duration;
/// use tower_redis_ratelimit::store::{QuotaLeases, RedisStore};
///
/// let store = RedisStore::builder("redis://127.0.0.1:6379")
///     .quota_leases(
///         QuotaLeases::default()
///             .lifetime(Duration::from_millis(50))
///             .max_share(0.05)
///             .max_keys(1_000),
///     )
///     .build()?;
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
///
/// [`RedisStoreBuilder::quota_leases`]: crate::store::redis::RedisStoreBuilder::quota_leases
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub struct QuotaLeases {
    pub(crate) lifetime: Duration,
    pub(crate) max_share: f64,
    pub(crate) max_keys: usize,
}

impl Default for QuotaLeases {
    /// Leases of at most a tenth of a rule's capacity, given back after 100 ms, for at most
    /// 10,000 keys at once.
    fn default() -> Self {
        Self {
            lifetime: Duration::from_millis(100),
            max_share: 0.1,
            max_keys: 10_000,
        }
    }
}

impl QuotaLeases {
    /// How long an instance keeps a lease before it gives back what it did not spend (default
    /// 100 ms, at most 60 s). A lease is also sized to what the key asked of this instance in
    /// about this time, so a shorter lifetime means smaller leases, more Redis calls and less
    /// quota held back from other instances.
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime;
        self
    }

    /// The largest lease, as a share of what each rule gives in a lifetime (its limit; for GCRA
    /// and the token bucket its burst and what its rate returns within the lifetime), in (0, 1]
    /// (default 0.1). With N instances, at most N times this share of a key's quota is held in
    /// leases at once: what an instance may be denied while others still hold unspent quota.
    pub fn max_share(mut self, share: f64) -> Self {
        self.max_share = share;
        self
    }

    /// How many keys may hold a lease in this process at once (default 10,000; at least 1).
    /// Keys beyond it are decided by Redis, exactly, one call per request.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |error: StoreConfigError| Err(error.into());
        let max = Duration::from_secs(60);
        if self.lifetime.is_zero() || self.lifetime > max {
            return invalid(StoreConfigError::LeaseLifetime {
                lifetime: self.lifetime,
                max,
            });
        }
        if !(self.max_share > 0.0 && self.max_share <= 1.0) {
            return invalid(StoreConfigError::LeaseShare {
                share: self.max_share,
            });
        }
        if self.max_keys == 0 {
            return invalid(StoreConfigError::NoLeaseKeys);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_name_what_is_wrong() {
        let cases = [
            (
                QuotaLeases::default().lifetime(Duration::ZERO),
                "lifetime must be above zero",
            ),
            (
                QuotaLeases::default().lifetime(Duration::from_secs(61)),
                "at most 60s, not 61s",
            ),
            (QuotaLeases::default().max_share(0.0), "(0, 1], not 0"),
            (QuotaLeases::default().max_share(1.5), "(0, 1], not 1.5"),
            (QuotaLeases::default().max_share(f64::NAN), "not NaN"),
            (QuotaLeases::default().max_keys(0), "at least one key"),
        ];
        for (leases, expected) in cases {
            let error = leases.validate().unwrap_err().to_string();
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
        }
        assert!(QuotaLeases::default().validate().is_ok());
    }
}
