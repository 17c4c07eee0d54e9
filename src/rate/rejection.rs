//! [`RateLimitRejection`]: why a [`RateLimitLayer`](crate::RateLimitLayer) refused a request.

use bytes::Bytes;
use http::{Response, StatusCode};

use crate::decision::Decision;
use crate::key::{Key, KeyError};
use crate::policy::Policy;
use crate::respond;
use crate::store::StoreError;

/// Why a [`RateLimitLayer`](crate::RateLimitLayer) answered a request itself: what its
/// `on_rejection` hook receives.
///
/// By default each is answered with its [`status`](Self::status) and a problem+json body, which
/// the [headers reference](crate::guide::headers#refusal-bodies) describes. Your own answer:
///
/// ```
/// use http::Response;
/// use tower_redis_ratelimit::key::GlobalKey;
/// use tower_redis_ratelimit::rate::RateLimitRejection;
/// use tower_redis_ratelimit::{Quota, RateLimitLayer, Rule};
///
/// let layer = RateLimitLayer::builder()
///     .rule(Rule::gcra("api", Quota::per_second(10)))
///     .key(GlobalKey::new("api"))
///     .on_rejection(|rejection: &RateLimitRejection| {
///         let body = match rejection {
///             RateLimitRejection::Limited { .. } => "slow down",
///             _ => "try again later",
///         };
///         Response::builder().status(rejection.status()).body(body).unwrap()
///     })
///     .build()?;
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RateLimitRejection {
    /// Over the quota ([`Outcome::Denied`](crate::decision::Outcome::Denied)), 429 with
    /// `Retry-After`, or never admissible ([`Outcome::Never`](crate::decision::Outcome::Never)),
    /// 429 without.
    Limited {
        /// The decision.
        decision: Decision,
        /// The policy that was checked.
        policy: Policy,
        /// The request's cost.
        cost: u32,
    },
    /// No key could be extracted and the layer rejects such requests: 400.
    MissingKey(KeyError),
    /// The key is on the layer's deny list ([`Exemptions`](crate::key::Exemptions)): 403.
    Denied(Key),
    /// The store failed and the layer fails closed: 503.
    Unavailable(StoreError),
}

impl RateLimitRejection {
    /// The status of the default response: 429, 400 or 503.
    pub fn status(&self) -> StatusCode {
        match self {
            RateLimitRejection::Limited { .. } => StatusCode::TOO_MANY_REQUESTS,
            RateLimitRejection::MissingKey(_) => StatusCode::BAD_REQUEST,
            RateLimitRejection::Denied(_) => StatusCode::FORBIDDEN,
            RateLimitRejection::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The default response: a problem+json body saying what happened.
    pub fn default_response(&self) -> Response<Bytes> {
        match self {
            RateLimitRejection::Limited {
                decision,
                policy,
                cost,
            } => respond::rate_limited(decision, policy, *cost),
            RateLimitRejection::MissingKey(err) => respond::missing_key(err),
            RateLimitRejection::Denied(_) => respond::denied(),
            RateLimitRejection::Unavailable(_) => respond::unavailable(),
        }
    }
}
