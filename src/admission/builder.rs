//! [`LayerBuilder`]: the settings every layer shares, and each middleware's own.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;

use super::admit::Admit;
use super::core::{Core, OnFailure};
use super::failure::{FailureMode, MissingKey};
use super::keys::Keys;
use super::layer::AdmissionLayer;
use super::responder::{Hook, Responder};
use crate::error::ConfigError;
use crate::headers::HeaderFamilies;
use crate::key::{Exemptions, Key, KeyError, KeyExtractor};
use crate::log::Throttled;
use crate::store::StoreError;

/// A middleware that is built with a [`LayerBuilder`]: the settings it adds to the shared ones.
#[allow(unreachable_pub)]
pub trait Configure: Admit {
    /// The middleware's own settings, filled by its builder's methods.
    type Settings: Send;
}

/// A middleware that keys requests with an extractor of the user's choice.
#[allow(unreachable_pub)]
pub trait Keyed: Configure {}

/// A middleware that asks a store, so can time out and fail, and reports in rate-limit headers.
#[allow(unreachable_pub)]
pub trait Stored: Configure {}

/// A middleware whose refusals cannot know when a retry would pass, so send a `Retry-After` hint
/// (the concurrency limit and both shedders: the `shed` feature implies `concurrency`).
#[cfg(feature = "concurrency")]
#[allow(unreachable_pub)]
pub trait Hinted: Configure {
    /// The hint unless the user sets one.
    const DEFAULT_RETRY_AFTER: Duration;
}

/// Configures a layer: the settings every middleware shares (below), and those of middleware `A`
/// (its builder alias documents them: [`RateLimitLayerBuilder`](crate::rate::RateLimitLayerBuilder),
/// ...). Only the settings that apply to `A` are offered.
#[must_use]
pub struct LayerBuilder<A: Configure> {
    pub(crate) settings: A::Settings,
    key: Option<Arc<dyn KeyExtractor>>,
    missing_key: MissingKey,
    exemptions: Option<Arc<Exemptions>>,
    failure: FailureMode,
    deadline: Duration,
    headers: HeaderFamilies,
    #[cfg(feature = "concurrency")]
    retry_after: Option<Duration>,
    on_rejection: Option<Hook<A::Rejection>>,
}

/// The deadline of a store call unless a layer says otherwise.
const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);

impl<A: Configure> LayerBuilder<A> {
    /// A builder with `settings` and the shared defaults, writing the `headers` families.
    pub(crate) fn new(settings: A::Settings, headers: HeaderFamilies) -> Self {
        Self {
            settings,
            key: None,
            missing_key: MissingKey::default(),
            exemptions: None,
            failure: FailureMode::default(),
            deadline: DEFAULT_DEADLINE,
            headers,
            #[cfg(feature = "concurrency")]
            retry_after: None,
            on_rejection: None,
        }
    }

    /// Replaces the default problem+json refusals with your own responses. The layer still adds
    /// its headers and `Retry-After` (keeping any `Retry-After` you set). The hook receives the
    /// middleware's own rejection type, which says why the request was refused.
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use tower_redis_ratelimit::{key::GlobalKey, Quota, RateLimitLayer, Rule};
    /// use tower_redis_ratelimit::rate::Rejection;
    ///
    /// let layer = RateLimitLayer::builder()
    ///     .rule(Rule::gcra("api", Quota::per_second(10)))
    ///     .key(GlobalKey::new("api"))
    ///     .on_rejection(|rejection: &Rejection| {
    ///         Response::builder().status(rejection.status()).body("slow down").unwrap()
    ///     })
    ///     .build()?;
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn on_rejection<F, B>(mut self, respond: F) -> Self
    where
        F: Fn(&A::Rejection) -> Response<B> + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        self.on_rejection = Some(Hook::new(respond));
        self
    }

    /// The layer of `admit` with the shared settings: keyed by `keys`, failing closed with
    /// `unavailable` (a middleware that asks no store has none), refusing with `default` unless
    /// the user gave a hook.
    pub(crate) fn finish(
        self,
        admit: A,
        keys: A::Keys,
        unavailable: Option<fn(StoreError) -> A::Rejection>,
        default: fn(&A::Rejection) -> Response<Bytes>,
    ) -> Result<AdmissionLayer<A>, ConfigError> {
        if self.deadline < Duration::from_millis(1) || self.deadline > Duration::from_secs(60) {
            return Err(ConfigError::DeadlineOutOfRange(self.deadline));
        }
        Ok(AdmissionLayer::new(Core {
            admit,
            keys,
            on_failure: OnFailure::new(self.failure, unavailable),
            deadline: self.deadline,
            families: self.headers,
            responder: Responder::new(default, self.on_rejection),
            failures: Throttled::new(Duration::from_secs(1)),
        }))
    }

    /// The user's key extractor, with the middleware's rejection of a request without a key.
    pub(crate) fn keys(
        &self,
        refuse: fn(KeyError) -> A::Rejection,
        deny: fn(Key) -> A::Rejection,
    ) -> Result<Keys<A::Rejection>, ConfigError> {
        let extractor = self.key.clone().ok_or(ConfigError::MissingKeyExtractor)?;
        Ok(Keys {
            extractor,
            missing: self.missing_key,
            refuse,
            exemptions: self.exemptions.clone(),
            deny,
        })
    }
}

impl<A: Keyed> LayerBuilder<A> {
    /// Who is limited: the extractor that finds each request's key (see [`key`](crate::key)).
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = Some(Arc::new(key));
        self
    }

    /// What to do when no key is found (default: [`MissingKey::Reject`], a 400).
    pub fn on_missing_key(mut self, missing_key: MissingKey) -> Self {
        self.missing_key = missing_key;
        self
    }

    /// Allow and deny lists of keys and networks: a listed key passes unchecked, or is refused
    /// with 403 (see [`Exemptions`]).
    pub fn exemptions(mut self, exemptions: Exemptions) -> Self {
        self.exemptions = (!exemptions.is_empty()).then(|| Arc::new(exemptions));
        self
    }
}

impl<A: Stored> LayerBuilder<A> {
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

    /// Which rate-limit headers to write (see [`HeaderFamilies`]).
    pub fn headers(mut self, headers: HeaderFamilies) -> Self {
        self.headers = headers;
        self
    }
}

#[cfg(feature = "concurrency")]
impl<A: Hinted> LayerBuilder<A> {
    /// The `Retry-After` sent with a refusal (rounded up to whole seconds, at least 1). Default:
    /// 1 s for a concurrency limit and the fleet shedder, where a slot frees when some request
    /// ends, which no one can predict: pick a hint near your typical request duration. 5 s for the
    /// utilisation shedder, whose drop probability changes over tens of seconds, so a client that
    /// retries at once mostly adds load.
    pub fn retry_after(mut self, hint: Duration) -> Self {
        self.retry_after = Some(hint);
        self
    }

    /// The `Retry-After` hint the user set, or the middleware's default.
    pub(crate) fn retry_hint(&self) -> Duration {
        self.retry_after.unwrap_or(A::DEFAULT_RETRY_AFTER)
    }
}
