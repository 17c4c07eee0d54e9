//! [`write_decision`]: the headers of a decision for a program that decides without a layer.

use http::HeaderMap;

use super::HeaderFamilies;
use super::quota_policy::RatePolicy;
use super::stamp::{Report, Stamp};
use crate::decision::Decision;
use crate::policy::Policy;

/// Writes onto `headers` what a [`RateLimitLayer`](crate::RateLimitLayer) writes on a response
/// for `decision`, made now on `policy`, in `families`: `RateLimit-Policy` and `RateLimit`, the
/// `Rate-Limiting-*` and `X-RateLimit-*` families when asked for, and `Retry-After` on a
/// denial. For a program that asks a [`Store`](crate::Store) itself and hands the headers to
/// someone else (the gateway's Envoy rate limit service puts them in its answer for Envoy to
/// pass on). `policy` names the rules in the headers: it may be another policy than the one
/// checked, with the same quotas in the same order, whose names suit a client better.
///
/// ```
/// use http::HeaderMap;
/// use tower_redis_ratelimit::headers::{HeaderFamilies, write_decision};
/// use tower_redis_ratelimit::{MemoryStore, Policy, Quota, Rule, Store};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(1)))?;
/// let store = MemoryStore::new();
/// store.check(&"client".into(), &policy, 1).await?;
/// let denied = store.check(&"client".into(), &policy, 1).await?;
/// let mut headers = HeaderMap::new();
/// write_decision(&mut headers, HeaderFamilies::IETF, &policy, denied);
/// assert_eq!(headers["ratelimit-policy"], "\"api\";q=1;w=60");
/// assert!(headers.contains_key("retry-after"));
/// # Ok(())
/// # }
/// ```
pub fn write_decision(
    headers: &mut HeaderMap,
    families: HeaderFamilies,
    policy: &Policy,
    decision: Decision,
) {
    let policy = RatePolicy::new(policy.clone());
    Stamp::new(families, Report::decided(decision, &policy, None)).apply(headers);
}
