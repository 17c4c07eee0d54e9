//! [`ConcurrencyConfigError`]: what is wrong with a concurrency limit's or a fleet shedder's
//! settings.

use std::time::Duration;

/// A concurrency limit or fleet shedder setting is invalid.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConcurrencyConfigError {
    /// A concurrency limit without a name.
    #[error("a concurrency limit needs a `.name(...)`: it is named in headers and storage keys")]
    MissingName,
    /// A concurrency limit admitting nothing.
    #[error(
        "a concurrency limit needs `.max_in_flight(n)` (`max_in_flight` in a file) with n >= 1"
    )]
    NoMaxInFlight,
    /// A permit TTL out of range.
    #[error("permit TTL {ttl:?} is out of range: use between {min:?} and {max:?}")]
    PermitTtlOutOfRange {
        /// The TTL refused.
        ttl: Duration,
        /// The shortest allowed.
        min: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// A renewal period that does not renew a permit before its TTL ends.
    #[error(
        "renewal period {renew_every:?} must be at least 1 ms and shorter than the permit TTL \
         ({ttl:?}); a third of it is a good choice"
    )]
    RenewalOutOfRange {
        /// The renewal period refused.
        renew_every: Duration,
        /// The permit TTL.
        ttl: Duration,
    },
    /// A fleet shedder without capacity.
    #[error("a fleet shedder needs `.capacity(n)` with n >= 1")]
    NoCapacity,
    /// A fleet shedder's share out of range.
    #[error("the {priority} share is {percent}%: use 1 to 100")]
    ShareOutOfRange {
        /// The priority (`low`, `normal`, `high`, `critical`).
        priority: &'static str,
        /// The share refused.
        percent: u8,
    },
    /// A fleet shedder's shares growing as priority falls.
    #[error(
        "shares must not grow as priority falls: low {}%, normal {}%, high {}%, critical {}%",
        shares[0], shares[1], shares[2], shares[3]
    )]
    SharesGrow {
        /// The shares of low, normal, high and critical traffic, in percent.
        shares: [u8; 4],
    },
}
