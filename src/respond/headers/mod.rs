//! The response headers that tell a client where it stands: three families
//! ([`HeaderFamilies`]: `Rate-Limiting-*`, the IETF `RateLimit` fields, GitHub's
//! `X-RateLimit-*`) and `Retry-After`. What each header means and which response carries it is
//! the [headers reference](crate::guide::headers), the one source for it.
//!
//! This module writes headers from what a middleware reports (a rate decision, a concurrency
//! decision, no decision, a shedder's wait); it knows no middleware.

#[cfg(feature = "concurrency")]
mod concurrent;
mod decided;
mod families;
mod format;
mod integer;
mod line;
mod names;
mod partition;
mod quota_policy;
mod rfc3339;
mod stamp;
mod write;

#[cfg(feature = "concurrency")]
pub(crate) use self::concurrent::Concurrent;
pub use self::families::HeaderFamilies;
pub(crate) use self::format::retry_seconds;
pub(crate) use self::partition::{Partition, Partitioner};
pub(crate) use self::quota_policy::RatePolicy;
#[cfg(feature = "concurrency")]
pub(crate) use self::quota_policy::concurrency_policy;
pub(crate) use self::stamp::{Report, Stamp, Undecided};
pub use self::write::PolicyHeaders;
