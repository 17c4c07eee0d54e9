//! [`Counted`]: a descriptor's limit as a request counts it, shared by the calls that decide it
//! and the headers of the group it is decided in.

use tower_redis_ratelimit::policy::Rule;

use super::limit::Reported;

/// A descriptor's limit to count, and what it is reported as.
pub(super) struct Counted {
    /// The descriptor's place in the request.
    pub(super) index: usize,
    pub(super) rule: Rule,
    pub(super) reported: Reported,
}
