//! [`PolicyHeaders`]: the headers of decisions for a program that decides without a layer.

use std::sync::Arc;

use http::HeaderMap;

use super::HeaderFamilies;
use super::quota_policy::RatePolicy;
use super::stamp::{Report, Stamp};
use crate::decision::Decision;
use crate::policy::Policy;

/// The headers a [`RateLimitLayer`](crate::RateLimitLayer) writes for decisions on one policy,
/// for a program that asks a [`Store`](crate::Store) itself and hands the headers to someone
/// else (the gateway's Envoy rate limit service puts them in its answer for Envoy to pass on).
/// Made once per policy (its `RateLimit-Policy` value is serialized here), then cheap to clone
/// and to write with.
///
/// The policy names the rules in the headers: it may be another policy than the one checked,
/// with the same quotas in the same order, whose names suit a client better.
///
/// ```
/// use http::HeaderMap;
/// use tower_redis_ratelimit::respond::{HeaderFamilies, PolicyHeaders};
/// use tower_redis_ratelimit::{MemoryStore, Policy, Quota, Rule, Store};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(1)))?;
/// let headers_of = PolicyHeaders::new(policy.clone());
/// let store = MemoryStore::new();
/// store.check(&"client".into(), &policy, 1).await?;
/// let denied = store.check(&"client".into(), &policy, 1).await?;
/// let mut headers = HeaderMap::new();
/// headers_of.write(&mut headers, HeaderFamilies::IETF, denied);
/// assert_eq!(headers["ratelimit-policy"], "\"api\";q=1;w=60");
/// assert!(headers.contains_key("retry-after"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct PolicyHeaders {
    policy: Arc<RatePolicy>,
}

impl PolicyHeaders {
    /// The headers of decisions on `policy`.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy: RatePolicy::new(policy),
        }
    }

    /// Writes onto `headers`, in `families`, what a layer writes for `decision`, made now:
    /// `RateLimit-Policy` and `RateLimit`, the `Rate-Limiting-*` and `X-RateLimit-*` families
    /// when asked for, and `Retry-After` on a denial.
    pub fn write(&self, headers: &mut HeaderMap, families: HeaderFamilies, decision: Decision) {
        Stamp::new(families, Report::decided(decision, &self.policy, None)).apply(headers);
    }
}
