//! The values that cross the store boundary for concurrency limits: which slot, for how long, and
//! what the store answered.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::PermitId;
use crate::error::{ConcurrencyConfigError, ConfigError};
use crate::key::Key;
use crate::policy::validate_name;

/// The shortest TTL a permit may have.
pub const MIN_PERMIT_TTL: Duration = Duration::from_millis(100);
/// The longest TTL a permit may have: a crashed server's slots stay taken this long.
pub const MAX_PERMIT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What permits are counted against: a limit's name and a client key. At most the limit's number
/// of permits are held for one slot at once, across every server sharing the store.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Slot {
    name: Arc<str>,
    key: Key,
}

impl Slot {
    /// The slot of client `key` under the limit `name` (1 to 64 characters of
    /// `A-Z a-z 0-9 . _ -`, as rule names).
    pub fn new(name: impl Into<Arc<str>>, key: impl Into<Key>) -> Result<Self, ConfigError> {
        let name = name.into();
        validate_name(&name)?;
        Ok(Self::valid(name, key.into()))
    }

    /// A slot whose name was validated when the layer was built.
    pub(crate) fn valid(name: Arc<str>, key: Key) -> Self {
        Self { name, key }
    }

    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client key.
    pub fn key(&self) -> &Key {
        &self.key
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Slot({:?}, {:?})", self.name, self.key)
    }
}

/// How long a permit is held without news from its holder, and how often the holder sends news.
///
/// A permit's TTL expires unless renewed: a server that crashes or is cut off from the store
/// loses its slots after at most `duration`. The store's heartbeat renews every live permit every
/// `renew_every` (default: a third of the TTL, so two renewals may fail before a live request
/// loses its slot).
///
/// ```
/// use std::time::Duration;
/// use tower_redis_ratelimit::store::permits::PermitTtl;
///
/// let ttl = PermitTtl::new(Duration::from_secs(30));
/// assert_eq!(ttl.renew_every(), Duration::from_secs(10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PermitTtl {
    duration: Duration,
    renew_every: Duration,
}

impl PermitTtl {
    /// A TTL of `duration`, renewed every third of it.
    pub const fn new(duration: Duration) -> Self {
        Self {
            duration,
            renew_every: Duration::from_nanos((duration.as_nanos() / 3) as u64),
        }
    }

    /// Renews every `every` instead (shorter than the TTL).
    pub const fn with_renewal_every(mut self, every: Duration) -> Self {
        self.renew_every = every;
        self
    }

    /// How long a permit lives without renewal.
    pub const fn duration(&self) -> Duration {
        self.duration
    }

    /// How often live permits are renewed.
    pub const fn renew_every(&self) -> Duration {
        self.renew_every
    }

    /// Checks the TTL is between [`MIN_PERMIT_TTL`] and [`MAX_PERMIT_TTL`] and renewed at least once,
    /// at most every millisecond, before it ends.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.duration < MIN_PERMIT_TTL || self.duration > MAX_PERMIT_TTL {
            return Err(ConcurrencyConfigError::PermitTtlOutOfRange {
                ttl: self.duration,
                min: MIN_PERMIT_TTL,
                max: MAX_PERMIT_TTL,
            }
            .into());
        }
        if self.renew_every < Duration::from_millis(1) || self.renew_every >= self.duration {
            return Err(ConcurrencyConfigError::RenewalOutOfRange {
                renew_every: self.renew_every,
                ttl: self.duration,
            }
            .into());
        }
        Ok(())
    }
}

/// One permit to renew: its slot, its id and the TTL to extend it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// The slot the permit was acquired from.
    pub slot: Slot,
    /// The permit.
    pub permit: PermitId,
    /// The TTL runs until now plus this.
    pub ttl: Duration,
}

/// A store's answer to an acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acquired {
    admitted: bool,
    in_flight: u64,
}

impl Acquired {
    /// An answer: whether the permit was admitted, and how many permits of the slot are live
    /// after the call (this one included when admitted).
    pub const fn new(admitted: bool, in_flight: u64) -> Self {
        Self {
            admitted,
            in_flight,
        }
    }

    /// Whether the permit is held now.
    pub const fn is_admitted(&self) -> bool {
        self.admitted
    }

    /// How many permits of the slot are live.
    pub const fn in_flight(&self) -> u64 {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_names_follow_rule_names() {
        assert!(Slot::new("ws", "user-1").is_ok());
        assert!(matches!(
            Slot::new("a b", "user-1"),
            Err(ConfigError::InvalidRuleName { .. })
        ));
    }

    #[test]
    fn permits_must_be_renewed_before_their_ttl_ends() {
        assert!(PermitTtl::new(Duration::from_secs(30)).validate().is_ok());
        assert!(
            PermitTtl::new(Duration::from_millis(10))
                .validate()
                .is_err()
        );
        assert!(
            PermitTtl::new(Duration::from_secs(2 * 86_400))
                .validate()
                .is_err()
        );
        let late =
            PermitTtl::new(Duration::from_secs(3)).with_renewal_every(Duration::from_secs(3));
        assert!(late.validate().is_err());
    }
}
