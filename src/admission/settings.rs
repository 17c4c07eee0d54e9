//! [`LayerSettings`]: the settings every layer shares, and the builder methods that fill them.
//!
//! Each middleware has one concrete builder (`RateLimitLayerBuilder`, ...) holding a
//! `LayerSettings` beside its own settings. The shared methods are written once here, as macros
//! each builder invokes for the groups that apply to it, so that every builder's rustdoc page
//! lists all of its settings and offers none that do not apply:
//!
//! | group | methods | builders |
//! |---|---|---|
//! | [`keyed_settings!`] | `key`, `on_missing_key`, `exemptions` | rate and concurrency limits |
//! | [`store_settings!`] | `failure_mode`, `deadline`, `headers` | every middleware that asks a store |
//! | [`rejection_setting!`] | `on_rejection` | all |
//!
//! The concurrency limits' own groups (`name`, `store`, `permit_ttl`, `retry_after`, ...) are in
//! `concurrency::settings`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;

use super::admit::Admit;
use super::core::{Core, OnFailure};
use super::failure::{FailureMode, MissingKey};
use super::keys::Keys;
use super::layer::AdmissionLayer;
use crate::error::ConfigError;
use crate::key::{Exemptions, Key, KeyError, KeyExtractor};
use crate::log::Throttled;
use crate::respond::{HeaderFamilies, Hook, Responder};
use crate::store::StoreError;

/// The deadline of a store call unless a layer says otherwise.
const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);

/// What every layer's builder fills, whatever the middleware; `R` is its rejection type.
pub(crate) struct LayerSettings<R> {
    pub(crate) key: Option<Arc<dyn KeyExtractor>>,
    pub(crate) missing_key: MissingKey,
    pub(crate) exemptions: Option<Exemptions>,
    pub(crate) failure: FailureMode,
    pub(crate) deadline: Duration,
    pub(crate) headers: HeaderFamilies,
    pub(crate) on_rejection: Option<Hook<R>>,
}

impl<R> LayerSettings<R> {
    /// The shared defaults, writing the `headers` families.
    pub(crate) fn new(headers: HeaderFamilies) -> Self {
        Self {
            key: None,
            missing_key: MissingKey::default(),
            exemptions: None,
            failure: FailureMode::default(),
            deadline: DEFAULT_DEADLINE,
            headers,
            on_rejection: None,
        }
    }

    /// The user's key extractor, with the middleware's rejections of a request without a usable
    /// key (`refuse`) and of a denied one (`deny`); the exemptions validated.
    pub(crate) fn keys(
        &mut self,
        refuse: fn(KeyError) -> R,
        deny: fn(Key) -> R,
    ) -> Result<Keys<R>, ConfigError> {
        let extractor = self.key.take().ok_or(ConfigError::MissingKeyExtractor)?;
        let exemptions = match self.exemptions.take() {
            Some(mut exemptions) => {
                exemptions.validate()?;
                exemptions.find_clients_with(&*extractor)?;
                (!exemptions.is_empty()).then(|| Arc::new(exemptions))
            }
            None => None,
        };
        Ok(Keys {
            extractor,
            missing: self.missing_key,
            refuse,
            exemptions,
            deny,
        })
    }

    /// The layer of `admit` with these settings: keyed by `keys` (none: every request alike),
    /// failing closed with `unavailable` (a middleware that asks no store has none), refusing
    /// with `default` unless the user gave a hook.
    pub(crate) fn finish<A: Admit<Rejection = R>>(
        self,
        admit: A,
        keys: Option<Keys<R>>,
        unavailable: Option<fn(StoreError) -> R>,
        default: fn(&R) -> Response<Bytes>,
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
}

/// `key`, `on_missing_key` and `exemptions` for a builder whose `common` field is a
/// [`LayerSettings`]: who is limited.
macro_rules! keyed_settings {
    ($builder:ty, $rejection:ty) => {
        impl $builder {
            /// The shared settings, for the configuration file's builders.
            #[cfg(feature = "config")]
            pub(crate) fn common_mut(
                &mut self,
            ) -> &mut $crate::admission::LayerSettings<$rejection> {
                &mut self.common
            }

            /// Who is limited: the extractor that finds each request's key (see
            /// [`key`](crate::key)). Required.
            pub fn key(mut self, key: impl $crate::key::KeyExtractor) -> Self {
                self.common.key = Some(::std::sync::Arc::new(key));
                self
            }

            /// What to do when no key is found (default:
            /// [`MissingKey::Reject`](crate::admission::MissingKey::Reject), a 400).
            pub fn on_missing_key(mut self, missing_key: $crate::admission::MissingKey) -> Self {
                self.common.missing_key = missing_key;
                self
            }

            /// Allow and deny lists of keys and of networks of client addresses: a request on the
            /// allow list passes unchecked, one on the deny list is refused with 403, the others
            /// are limited as usual (see [`Exemptions`](crate::key::Exemptions)). Validated by
            /// `build()`.
            pub fn exemptions(mut self, exemptions: $crate::key::Exemptions) -> Self {
                self.common.exemptions = Some(exemptions);
                self
            }
        }
    };
}

/// `failure_mode`, `deadline` and `headers` for a builder of a middleware that asks a store.
macro_rules! store_settings {
    ($builder:ty) => {
        impl $builder {
            /// What to do when the store fails (default:
            /// [`FailureMode::Open`](crate::admission::FailureMode::Open)).
            pub fn failure_mode(mut self, failure: $crate::admission::FailureMode) -> Self {
                self.common.failure = failure;
                self
            }

            /// How long to wait for the store before applying the failure mode (default 100 ms;
            /// between 1 ms and 60 s).
            pub fn deadline(mut self, deadline: ::std::time::Duration) -> Self {
                self.common.deadline = deadline;
                self
            }

            /// Which rate-limit headers to write (see
            /// [`HeaderFamilies`](crate::respond::HeaderFamilies)).
            pub fn headers(mut self, headers: $crate::respond::HeaderFamilies) -> Self {
                self.common.headers = headers;
                self
            }
        }
    };
}

/// `on_rejection` for a builder whose refusals are `$rejection`.
macro_rules! rejection_setting {
    ($builder:ty, $rejection:ty) => {
        impl $builder {
            /// Replaces the default problem+json refusals with your own responses. The layer
            /// still adds its headers and `Retry-After` (keeping any `Retry-After` you set). The
            #[doc = concat!("hook receives the [`", stringify!($rejection), "`], which says why the request was refused.")]
            pub fn on_rejection<F, B>(mut self, respond: F) -> Self
            where
                F: Fn(&$rejection) -> ::http::Response<B> + Send + Sync + 'static,
                B: Into<::bytes::Bytes>,
            {
                self.common.on_rejection = Some($crate::respond::Hook::new(respond));
                self
            }
        }
    };
}

pub(crate) use {keyed_settings, rejection_setting, store_settings};
