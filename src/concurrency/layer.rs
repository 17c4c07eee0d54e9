//! [`ConcurrencyLimitLayer`] and its builder: the configuration of one concurrency limit.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use tower_layer::Layer;

use super::headers::{InFlight, policy_header};
use super::{Acquired, Busy, ConcurrencyLimit, ConcurrencyPermit, Lease, PermitId, Slot, permit};
use crate::error::{ConfigError, StoreError};
use crate::headers::{Headers, Stamp};
use crate::key::{KeyError, KeyExtractor};
use crate::layer::{FailureMode, MissingKey};
use crate::log::Throttled;
use crate::policy::validate_name;
use crate::response::RejectFn;
use crate::response::Rejection;
use crate::shed::{FleetShares, Priority};
use crate::store::{MemoryStore, Store};

/// A tower [`Layer`] that limits how many requests are in flight at once per key, across every
/// server sharing the store (seed 000, and seed 004's concurrent requests limiter).
///
/// A request over the limit is answered `429 Too Many Requests` with `Retry-After` (1 s by
/// default) and the headers `RateLimit-Policy: "name";q=N;qu="concurrent-requests"` and
/// `RateLimit: "name";r=<free slots>`. An admitted request holds its slot until its response body
/// is finished or dropped, or until it is cancelled, panics or fails; a handler may hold it longer
/// by keeping the [`ConcurrencyPermit`] from the request extensions (WebSockets).
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use tower_redis_ratelimit::{key::HeaderKey, ConcurrencyLimitLayer};
///
/// let limit = ConcurrencyLimitLayer::builder()
///     .name("reports")
///     .max_in_flight(2)
///     .key(HeaderKey::new("x-api-key"))
///     .lease(Duration::from_secs(30))
///     .build()?;
/// let app: Router = Router::new().route("/report", get(|| async { "done" }).layer(limit));
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimitLayer {
    config: Arc<Config>,
}

impl ConcurrencyLimitLayer {
    /// A builder for a layer.
    pub fn builder() -> ConcurrencyLimitLayerBuilder {
        ConcurrencyLimitLayerBuilder {
            name: None,
            max_in_flight: None,
            key: None,
            store: None,
            lease: Duration::from_secs(30),
            renew_every: None,
            missing_key: MissingKey::default(),
            failure: FailureMode::default(),
            deadline: Duration::from_millis(100),
            headers: Headers::default(),
            retry_after: Duration::from_secs(1),
            on_rejection: None,
        }
    }

    pub(crate) fn from_config(config: Config) -> Self {
        Self {
            config: Arc::new(config),
        }
    }

    #[cfg(test)]
    pub(crate) fn admission(&self) -> &Admission {
        &self.config.admission
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> ConcurrencyLimit<S> {
        ConcurrencyLimit::from_config(inner, self.config.clone())
    }
}

impl fmt::Debug for ConcurrencyLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitLayer")
            .field("config", &self.config)
            .finish()
    }
}

/// Configures a [`ConcurrencyLimitLayer`]. Required: a [`name`](Self::name), a
/// [`max_in_flight`](Self::max_in_flight) and a [`key`](Self::key).
#[must_use]
pub struct ConcurrencyLimitLayerBuilder {
    name: Option<Arc<str>>,
    max_in_flight: Option<u32>,
    key: Option<Arc<dyn KeyExtractor>>,
    store: Option<Arc<dyn Store>>,
    lease: Duration,
    renew_every: Option<Duration>,
    missing_key: MissingKey,
    failure: FailureMode,
    deadline: Duration,
    headers: Headers,
    retry_after: Duration,
    on_rejection: Option<Arc<RejectFn>>,
}

impl ConcurrencyLimitLayerBuilder {
    /// The limit's name: in the headers and the storage keys (1 to 64 characters of
    /// `A-Z a-z 0-9 . _ -`). Layers with the same name and store share their slots.
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How many requests of one key may be in flight at once (at least 1).
    pub fn max_in_flight(mut self, max: u32) -> Self {
        self.max_in_flight = Some(max);
        self
    }

    /// Who is limited: the extractor that finds each request's key.
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = Some(Arc::new(key));
        self
    }

    /// Where permits are held (default: a new [`MemoryStore`] for this layer). Pass a
    /// [`RedisStore`](crate::RedisStore) to share the limit between servers.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// How long a permit survives without renewal (default 30 s, between [`MIN_LEASE`] and
    /// [`MAX_LEASE`]): the longest a crashed server's slots stay taken.
    ///
    /// [`MIN_LEASE`]: super::MIN_LEASE
    /// [`MAX_LEASE`]: super::MAX_LEASE
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How often the store's heartbeat renews live permits (default: a third of the lease).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    /// What to do when no key is found (default: [`MissingKey::Reject`], a 400).
    pub fn on_missing_key(mut self, missing_key: MissingKey) -> Self {
        self.missing_key = missing_key;
        self
    }

    /// What to do when the store fails (default: [`FailureMode::Open`]: the request passes
    /// without a slot).
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

    /// The `Retry-After` sent with a refusal (default 1 s; rounded up to whole seconds, at
    /// least 1). A slot frees when some request ends, which no one can predict: pick a hint near
    /// your typical request duration.
    pub fn retry_after(mut self, hint: Duration) -> Self {
        self.retry_after = hint;
        self
    }

    /// Replaces the default problem+json rejections with your own responses, as
    /// [`RateLimitLayerBuilder::on_rejection`](crate::RateLimitLayerBuilder::on_rejection).
    pub fn on_rejection<F, B>(mut self, respond: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<B> + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        self.on_rejection = Some(Arc::new(move |rejection: &Rejection<'_>| {
            respond(rejection).map(Into::into)
        }));
        self
    }

    /// Validates the configuration and builds the layer.
    pub fn build(self) -> Result<ConcurrencyLimitLayer, ConfigError> {
        let max = match self.max_in_flight {
            Some(0) | None => {
                return Err(ConfigError::Concurrency(
                    "a concurrency limit needs `.max_in_flight(n)` with n >= 1".into(),
                ));
            }
            Some(max) => max,
        };
        let key = self.key.clone().ok_or(ConfigError::MissingKeyExtractor)?;
        self.config(Admission::PerKey { max }, key)
            .map(ConcurrencyLimitLayer::from_config)
    }

    /// The validated configuration for `admission` (shared with the fleet shedder's builder).
    pub(crate) fn config(
        self,
        admission: Admission,
        key: Arc<dyn KeyExtractor>,
    ) -> Result<Config, ConfigError> {
        let name = self.name.ok_or_else(|| {
            ConfigError::Concurrency("a concurrency limit needs a `.name(...)`".into())
        })?;
        validate_name(&name)?;
        let mut lease = Lease::new(self.lease);
        if let Some(every) = self.renew_every {
            lease = lease.with_renewal_every(every);
        }
        lease.validate()?;
        if self.deadline < Duration::from_millis(1) || self.deadline > Duration::from_secs(60) {
            return Err(ConfigError::DeadlineOutOfRange(self.deadline));
        }
        Ok(Config {
            name,
            store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
            key,
            admission,
            lease,
            missing_key: self.missing_key,
            failure: self.failure,
            deadline: self.deadline,
            headers: self.headers,
            retry_after: self.retry_after,
            on_rejection: self.on_rejection,
            failures: Throttled::new(Duration::from_secs(1)),
        })
    }
}

/// How many permits a request may share.
pub(crate) enum Admission {
    /// At most `max` per key (429 beyond).
    PerKey { max: u32 },
    /// The fleet shedder: one global slot, each priority up to its share (503 beyond).
    Fleet(FleetShares),
}

/// The configuration shared by a layer and every service it makes.
pub(crate) struct Config {
    pub(crate) name: Arc<str>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    admission: Admission,
    lease: Lease,
    pub(crate) missing_key: MissingKey,
    failure: FailureMode,
    pub(crate) deadline: Duration,
    headers: Headers,
    retry_after: Duration,
    on_rejection: Option<Arc<RejectFn>>,
    failures: Throttled,
}

/// An acquisition on its way: given back if its answer never comes (cancelled, timed out), since
/// the store may have admitted it all the same.
pub(crate) struct Ticket {
    store: Arc<dyn Store>,
    pending: Option<(Slot, PermitId)>,
    limit: u32,
    priority: Option<Priority>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some((slot, id)) = self.pending.take() {
            permit::release(&self.store, &slot, id);
        }
    }
}

/// What to do with a request once the store has answered.
pub(crate) enum Next<B> {
    /// Call the service holding the permit (none when failing open), then stamp its response.
    Pass(Request<B>, Option<ConcurrencyPermit>, Stamp),
    /// Answer with this response (already stamped).
    Reject(Response<Bytes>),
}

impl Config {
    /// Starts acquiring a slot for a request with this `key` (for the fleet shedder, recording
    /// the request's priority in its extensions).
    pub(crate) fn acquire(
        &self,
        parts: &mut Parts,
        key: crate::key::Key,
    ) -> (crate::store::StoreFuture<Acquired>, Ticket) {
        let (limit, priority) = match &self.admission {
            Admission::PerKey { max } => (*max, None),
            Admission::Fleet(shares) => {
                let priority = shares.classify(parts);
                (shares.limit(priority), Some(priority))
            }
        };
        let slot = Slot::valid(self.name.clone(), key);
        let id = PermitId::next();
        let future = self.store.acquire(&slot, id, limit, self.lease);
        let ticket = Ticket {
            store: self.store.clone(),
            pending: Some((slot, id)),
            limit,
            priority,
        };
        (future, ticket)
    }

    /// Turns the store's answer into the next step.
    pub(crate) fn decide<B>(
        &self,
        result: Result<Acquired, StoreError>,
        mut request: Request<B>,
        mut ticket: Ticket,
    ) -> Next<B> {
        let acquired = match result {
            Ok(acquired) => acquired,
            Err(err) => {
                // The ticket stays armed, since the store may have admitted the permit after
                // all, unless the acquisition was never sent: then there is nothing to give
                // back, and releases sent during an outage would only add connection attempts.
                if err.never_sent() {
                    ticket.pending = None;
                }
                return self.failed(&err, request, ticket.limit);
            }
        };
        let Some((slot, id)) = ticket.pending.take() else {
            unreachable!("a ticket is decided once")
        };
        let stamp = InFlight {
            name: self.name.clone(),
            limit: ticket.limit,
            in_flight: acquired.in_flight(),
            admitted: acquired.is_admitted(),
            retry_after: self.retry_after,
        };
        let stamp = Stamp::in_flight(self.headers, stamp);
        if acquired.is_admitted() {
            let permit = ConcurrencyPermit::new(self.store.clone(), slot, id);
            request.extensions_mut().insert(permit.clone());
            return Next::Pass(request, Some(permit), stamp);
        }
        let busy = Busy {
            name: self.name.clone(),
            limit: ticket.limit,
            capacity: self.capacity(),
            in_flight: acquired.in_flight(),
            retry_after: self.retry_after,
            priority: ticket.priority,
        };
        let rejection = match self.admission {
            Admission::PerKey { .. } => Rejection::TooManyInFlight(&busy),
            Admission::Fleet(_) => Rejection::FleetShed(&busy),
        };
        Next::Reject(self.respond(&rejection, stamp))
    }

    /// The answer when the store failed, for a request whose limit was `limit`.
    fn failed<B>(&self, err: &StoreError, request: Request<B>, limit: u32) -> Next<B> {
        let policy = policy_header(&self.name, limit);
        match self.failure {
            FailureMode::Open => {
                self.failures.warn(|suppressed| {
                    tracing::warn!(
                        error = %err,
                        suppressed,
                        limit = %self.name,
                        "concurrency limiting skipped: the store failed and the layer fails open"
                    );
                });
                let stamp = Stamp::skipped(self.headers).with_policy_header(policy);
                Next::Pass(request, None, stamp)
            }
            FailureMode::Closed => {
                self.failures.warn(|suppressed| {
                    tracing::warn!(
                        error = %err,
                        suppressed,
                        limit = %self.name,
                        "request refused: the store failed and the layer fails closed"
                    );
                });
                let rejection = Rejection::Unavailable(err);
                let stamp = Stamp::unavailable(self.headers).with_policy_header(policy);
                Next::Reject(self.respond(&rejection, stamp))
            }
        }
    }

    /// The response for a request without a key.
    pub(crate) fn reject_missing_key(&self, err: &KeyError) -> Response<Bytes> {
        // Without a key there is no priority to pick a fleet share by: name the whole capacity.
        let policy = policy_header(&self.name, self.capacity());
        let stamp = Stamp::missing_key(self.headers).with_policy_header(policy);
        self.respond(&Rejection::MissingKey(err), stamp)
    }

    fn respond(&self, rejection: &Rejection<'_>, stamp: Stamp) -> Response<Bytes> {
        let mut response = self.respond_unstamped(rejection);
        stamp.apply(response.headers_mut());
        response
    }

    fn respond_unstamped(&self, rejection: &Rejection<'_>) -> Response<Bytes> {
        match &self.on_rejection {
            Some(respond) => respond(rejection),
            None => rejection.default_response(),
        }
    }

    fn capacity(&self) -> u32 {
        match &self.admission {
            Admission::PerKey { max } => *max,
            Admission::Fleet(shares) => shares.capacity(),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("name", &self.name)
            .field("capacity", &self.capacity())
            .field("lease", &self.lease)
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
    use crate::key::GlobalKey;

    #[test]
    fn build_reports_what_is_missing_or_wrong() {
        let base = || {
            ConcurrencyLimitLayer::builder()
                .name("ws")
                .max_in_flight(2)
                .key(GlobalKey::new("g"))
        };
        assert!(base().build().is_ok());
        assert!(matches!(
            base().max_in_flight(0).build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            ConcurrencyLimitLayer::builder()
                .max_in_flight(1)
                .key(GlobalKey::new("g"))
                .build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            base().name("no spaces").build(),
            Err(ConfigError::InvalidRuleName { .. })
        ));
        assert_eq!(
            ConcurrencyLimitLayer::builder()
                .name("ws")
                .max_in_flight(1)
                .build()
                .unwrap_err(),
            ConfigError::MissingKeyExtractor
        );
        assert!(matches!(
            base().lease(Duration::from_millis(5)).build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            base().renew_every(Duration::from_secs(30)).build(),
            Err(ConfigError::Concurrency(_))
        ));
        assert!(matches!(
            base().deadline(Duration::ZERO).build(),
            Err(ConfigError::DeadlineOutOfRange(_))
        ));
    }
}
