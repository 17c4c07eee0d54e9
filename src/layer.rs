//! [`RateLimitLayer`] and its builder: the configuration of one limit, validated in `build()`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use tower_layer::Layer;

use crate::decision::Decision;
use crate::error::{ConfigError, StoreError};
use crate::headers::{Headers, Stamp};
use crate::key::{KeyError, KeyExtractor};
use crate::log::Throttled;
use crate::policy::{Policy, Rule};
use crate::response::{Rejection, Responder};
use crate::service::RateLimit;
use crate::store::{MemoryStore, Store};

/// What to do when the store cannot answer (down, unreachable, slower than the deadline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureMode {
    /// Let the request pass unlimited, tell the client with `Rate-Limiting-State: Skipped` (and
    /// the static `RateLimit-Policy`; no header that needs a decision), and log a warning (at most
    /// one per second per layer, with a count of the others). The default: a rate limiter outage
    /// should not become a service outage. Such a request carries no [`Decision`] in its
    /// extensions: handlers take it as `Option<Extension<Decision>>`.
    #[default]
    Open,
    /// Refuse the request with 503, `Retry-After: 1` and the static `RateLimit-Policy`: for limits
    /// that protect something that must never be overrun.
    Closed,
}

/// What to do with a request for which the key extractor finds no key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingKey {
    /// Answer 400 with a problem+json body saying what was missing, and the static
    /// `RateLimit-Policy` (the default, as seed 002).
    #[default]
    Reject,
    /// Let the request pass without limiting it (nor rate-limit headers, nor a [`Decision`] in its
    /// extensions). Only a missing key is skipped: an [invalid](crate::key::KeyErrorKind::Invalid) one (e.g. a key header sent
    /// twice) is still answered with 400, or a client could escape its limit at will.
    Skip,
}

impl MissingKey {
    /// Whether a request with this key error passes unlimited. Only a request with nothing to key
    /// on may: an invalid key (a header sent twice, an unusable forwarded hop) is the client's
    /// own doing, and skipping it would let a client escape its limit at will.
    pub(crate) fn skips(self, err: &KeyError) -> bool {
        self == MissingKey::Skip && err.kind() == crate::key::KeyErrorKind::Missing
    }
}

type CostFn = dyn Fn(&Parts) -> u32 + Send + Sync;

/// A tower [`Layer`] that rate limits requests: one policy, one key, one store.
///
/// Layers are cheap to clone and every service made from one shares the same limit (the state
/// lives in the store, not in the service), so they work behind axum's cloning router. Put one
/// on a router, on a single route, or in a `ServiceBuilder`:
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use tower_redis_ratelimit::{key::ClientIp, Quota, RateLimitLayer, Rule};
///
/// let limit = RateLimitLayer::builder()
///     .rule(Rule::fixed_window("hello", Quota::new(5, Duration::from_secs(10))))
///     .key(ClientIp::peer())
///     .build()?;
/// let app: Router = Router::new().route("/hello", get(|| async { "hello" }).layer(limit));
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    config: Arc<Config>,
}

impl RateLimitLayer {
    /// A builder for a layer.
    pub fn builder() -> RateLimitLayerBuilder {
        RateLimitLayerBuilder {
            rules: Vec::new(),
            key: None,
            store: None,
            missing_key: MissingKey::default(),
            failure: FailureMode::default(),
            deadline: Duration::from_millis(100),
            headers: Headers::default(),
            cost: None,
            on_rejection: Responder::default(),
        }
    }

    /// The policy this layer enforces.
    pub fn policy(&self) -> &Policy {
        &self.config.policy
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::from_config(inner, self.config.clone())
    }
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("config", &self.config)
            .finish()
    }
}

/// Configures a [`RateLimitLayer`]. Required: at least one [`rule`](Self::rule) and a
/// [`key`](Self::key); everything else has a default.
#[must_use]
pub struct RateLimitLayerBuilder {
    rules: Vec<Rule>,
    key: Option<Arc<dyn KeyExtractor>>,
    store: Option<Arc<dyn Store>>,
    missing_key: MissingKey,
    failure: FailureMode,
    deadline: Duration,
    headers: Headers,
    cost: Option<Arc<CostFn>>,
    on_rejection: Responder,
}

impl RateLimitLayerBuilder {
    /// Adds a rule. Several rules form one policy checked all or nothing: a request must fit every
    /// one of them, and a denied request consumes none.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Sets every rule at once, from a policy.
    pub fn policy(mut self, policy: &Policy) -> Self {
        self.rules = policy.rules().to_vec();
        self
    }

    /// Who is limited: the extractor that finds each request's key.
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = Some(Arc::new(key));
        self
    }

    /// Where state is kept (default: a new [`MemoryStore`] for this layer). Share one store
    /// between layers by passing clones of it.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// What to do when no key is found (default: [`MissingKey::Reject`], a 400).
    pub fn on_missing_key(mut self, missing_key: MissingKey) -> Self {
        self.missing_key = missing_key;
        self
    }

    /// What to do when the store fails (default: [`FailureMode::Open`]).
    pub fn failure_mode(mut self, failure: FailureMode) -> Self {
        self.failure = failure;
        self
    }

    /// How long to wait for the store before applying the failure mode (default 100 ms; between
    /// 1 ms and 60 s).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Which rate-limit headers to write (default: [`Headers::DEFAULT`]).
    pub fn headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }

    /// The cost of each request (default 1): e.g. by route, by size, or 0 to only report.
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u32 + Send + Sync + 'static) -> Self {
        self.cost = Some(Arc::new(cost));
        self
    }

    /// Replaces the default problem+json rejections with your own responses. The layer still adds
    /// the rate-limit headers and `Retry-After` (keeping any `Retry-After` you set).
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use tower_redis_ratelimit::{key::GlobalKey, Quota, RateLimitLayer, Rejection, Rule};
    ///
    /// let layer = RateLimitLayer::builder()
    ///     .rule(Rule::gcra("api", Quota::per_second(10)))
    ///     .key(GlobalKey::new("api"))
    ///     .on_rejection(|rejection: &Rejection<'_>| {
    ///         Response::builder().status(rejection.status()).body("slow down").unwrap()
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn on_rejection<F, B>(mut self, respond: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<B> + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        self.on_rejection = Responder::custom(respond);
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(self) -> Result<RateLimitLayer, ConfigError> {
        let policy = Policy::new(self.rules)?;
        let key = self.key.ok_or(ConfigError::MissingKeyExtractor)?;
        if self.deadline < Duration::from_millis(1) || self.deadline > Duration::from_secs(60) {
            return Err(ConfigError::DeadlineOutOfRange(self.deadline));
        }
        let config = Config {
            store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
            policy,
            key,
            missing_key: self.missing_key,
            failure: self.failure,
            deadline: self.deadline,
            headers: self.headers,
            cost: self.cost,
            on_rejection: self.on_rejection,
            failures: Throttled::new(Duration::from_secs(1)),
        };
        Ok(RateLimitLayer {
            config: Arc::new(config),
        })
    }
}

/// The configuration shared by a layer and every service it makes.
pub(crate) struct Config {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) policy: Policy,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) missing_key: MissingKey,
    pub(crate) failure: FailureMode,
    pub(crate) deadline: Duration,
    pub(crate) headers: Headers,
    cost: Option<Arc<CostFn>>,
    on_rejection: Responder,
    failures: Throttled,
}

/// What to do with a request once its key and the store's answer are known.
pub(crate) enum Next<B> {
    /// Call the service, then stamp its response.
    Pass(Request<B>, Stamp),
    /// Answer with this response (already stamped).
    Reject(Response<Bytes>),
}

impl Config {
    pub(crate) fn cost(&self, parts: &Parts) -> u32 {
        self.cost.as_ref().map_or(1, |cost| cost(parts))
    }

    /// Turns the store's answer into the next step.
    pub(crate) fn decide<B>(
        &self,
        result: Result<Decision, StoreError>,
        mut request: Request<B>,
        cost: u32,
    ) -> Next<B> {
        match result {
            Ok(decision) => {
                if decision.is_allowed() {
                    request.extensions_mut().insert(decision.clone());
                    Next::Pass(
                        request,
                        Stamp::for_decision(decision, &self.policy, self.headers),
                    )
                } else {
                    let rejection = Rejection::Limited {
                        decision: &decision,
                        policy: &self.policy,
                        cost,
                    };
                    let response = self.respond_unstamped(&rejection);
                    Next::Reject(stamped(
                        response,
                        Stamp::for_decision(decision, &self.policy, self.headers),
                    ))
                }
            }
            Err(err) => match self.failure {
                FailureMode::Open => {
                    self.failures.warn(|suppressed| {
                        tracing::warn!(
                            error = %err,
                            suppressed,
                            policy = ?self.policy.rules().iter().map(Rule::name).collect::<Vec<_>>(),
                            "rate limiting skipped: the store failed and the layer fails open"
                        );
                    });
                    Next::Pass(
                        request,
                        Stamp::skipped(self.headers).with_policy(&self.policy),
                    )
                }
                FailureMode::Closed => {
                    self.failures.warn(|suppressed| {
                        tracing::warn!(error = %err, suppressed, "request refused: the store failed and the layer fails closed");
                    });
                    let response = self.respond_unstamped(&Rejection::Unavailable(&err));
                    let stamp = Stamp::unavailable(self.headers).with_policy(&self.policy);
                    Next::Reject(stamped(response, stamp))
                }
            },
        }
    }

    /// The response for a request without a key.
    pub(crate) fn reject_missing_key(&self, err: &KeyError) -> Response<Bytes> {
        let response = self.respond_unstamped(&Rejection::MissingKey(err));
        stamped(
            response,
            Stamp::missing_key(self.headers).with_policy(&self.policy),
        )
    }

    /// The rejection's response, the user's own when they gave one, before the layer's headers.
    fn respond_unstamped(&self, rejection: &Rejection<'_>) -> Response<Bytes> {
        self.on_rejection.respond(rejection)
    }
}

fn stamped(mut response: Response<Bytes>, stamp: Stamp) -> Response<Bytes> {
    stamp.apply(response.headers_mut());
    response
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("policy", &self.policy)
            .field("missing_key", &self.missing_key)
            .field("failure", &self.failure)
            .field("deadline", &self.deadline)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;
    use crate::key::GlobalKey;

    #[test]
    fn build_reports_what_is_missing_or_wrong() {
        let err = RateLimitLayer::builder()
            .key(GlobalKey::new("g"))
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::EmptyPolicy);
        let err = RateLimitLayer::builder()
            .rule(Rule::gcra("a", Quota::per_second(1)))
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::MissingKeyExtractor);
        let err = RateLimitLayer::builder()
            .rule(Rule::gcra("a", Quota::per_second(1)))
            .key(GlobalKey::new("g"))
            .deadline(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::DeadlineOutOfRange(Duration::ZERO));
    }
}
