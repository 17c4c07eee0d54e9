//! [`HeaderFamilies`]: which families of rate-limit headers a layer writes.

use std::ops::BitOr;

/// Which families of rate-limit headers a layer writes. Combine with `|`.
///
/// ```
/// use tower_redis_ratelimit::headers::HeaderFamilies;
///
/// let headers = HeaderFamilies::IETF | HeaderFamilies::X_RATELIMIT;
/// assert!(headers.contains(HeaderFamilies::IETF));
/// assert!(!headers.contains(HeaderFamilies::RATE_LIMITING));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeaderFamilies(u8);

impl HeaderFamilies {
    /// No rate-limit headers (`Retry-After` belongs to no family and is still sent where due).
    pub const NONE: HeaderFamilies = HeaderFamilies(0);
    /// The `Rate-Limiting-*` headers: `Total-Requests`, `State`, `Expires-At`.
    pub const RATE_LIMITING: HeaderFamilies = HeaderFamilies(1);
    /// The IETF draft's `RateLimit-Policy` and `RateLimit`.
    pub const IETF: HeaderFamilies = HeaderFamilies(2);
    /// GitHub-style `X-RateLimit-*`.
    pub const X_RATELIMIT: HeaderFamilies = HeaderFamilies(4);
    /// The default: `Rate-Limiting-*` and the IETF headers.
    pub const DEFAULT: HeaderFamilies = HeaderFamilies(1 | 2);
    /// Every family.
    pub const ALL: HeaderFamilies = HeaderFamilies(1 | 2 | 4);

    /// Whether every family of `other` is in this set.
    pub const fn contains(self, other: HeaderFamilies) -> bool {
        self.0 & other.0 == other.0
    }
}

impl Default for HeaderFamilies {
    fn default() -> Self {
        HeaderFamilies::DEFAULT
    }
}

impl BitOr for HeaderFamilies {
    type Output = HeaderFamilies;

    fn bitor(self, rhs: HeaderFamilies) -> HeaderFamilies {
        HeaderFamilies(self.0 | rhs.0)
    }
}
