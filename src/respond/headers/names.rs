//! The names of the headers this crate writes.

use http::HeaderName;

pub(crate) const TOTAL_REQUESTS: HeaderName =
    HeaderName::from_static("rate-limiting-total-requests");
pub(crate) const STATE: HeaderName = HeaderName::from_static("rate-limiting-state");
pub(crate) const EXPIRES_AT: HeaderName = HeaderName::from_static("rate-limiting-expires-at");
pub(crate) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub(crate) const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) const X_USED: HeaderName = HeaderName::from_static("x-ratelimit-used");
pub(crate) const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
