//! The response headers that tell a client where it stands.
//!
//! | family | headers |
//! |---|---|
//! | [`HeaderFamilies::RATE_LIMITING`] | `Rate-Limiting-Total-Requests`, `Rate-Limiting-State` (`Allow`, `Deny`, `Degraded` when a fallback decided while the shared store failed, or `Skipped` when the store failed open), `Rate-Limiting-Expires-At` (RFC 3339, UTC, rounded up to the second) |
//! | [`HeaderFamilies::IETF`] (draft-ietf-httpapi-ratelimit-headers-10) | `RateLimit-Policy: "name";q=5;w=10`, `RateLimit: "name";r=2;t=7` |
//! | [`HeaderFamilies::X_RATELIMIT`] (GitHub style) | `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Used`, `X-RateLimit-Reset` (Unix epoch seconds, rounded up) |
//!
//! Only a decision fills them all. A response without one carries what is known without it, in
//! the chosen families: `RateLimit-Policy` (the policy is static) on the 400 of a request without
//! a key and on every response while the store fails; `Rate-Limiting-State: Skipped` on a request
//! that passed because the store failed open.
//!
//! `Retry-After` (whole seconds, rounded up, at least 1) is on every 429 and 503 whatever the set,
//! except the 429 of a request that can never pass
//! ([`Outcome::Never`](crate::decision::Outcome::Never)): no wait would let it in, so no wait is
//! named.
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

#[cfg(feature = "concurrency")]
pub(crate) use self::concurrent::Concurrent;
pub use self::families::HeaderFamilies;
pub(crate) use self::format::retry_seconds;
pub(crate) use self::partition::{Partition, Partitioner};
pub(crate) use self::quota_policy::RatePolicy;
#[cfg(feature = "concurrency")]
pub(crate) use self::quota_policy::concurrency_policy;
pub(crate) use self::stamp::{Report, Stamp, Undecided};
