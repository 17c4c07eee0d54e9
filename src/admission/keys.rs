//! Where a layer's requests get their keys: the user's extractor ([`Keys`]), or nowhere
//! ([`NoKeys`]: a load shedder counts every request alike).

use std::sync::Arc;

use http::request::Parts;

use super::failure::MissingKey;
use crate::key::{Exemptions, Key, KeyError, KeyErrorKind, KeyExtractor, Listed};

/// Where a layer's requests get their keys.
#[allow(unreachable_pub)]
pub trait KeySource<R>: Send + Sync + 'static {
    /// What the check receives: a [`Key`], or nothing.
    type Key;

    /// The request's key, or what to do without one.
    fn key(&self, parts: &Parts) -> Result<Self::Key, NoKey<R>>;

    /// Whether requests without a key are let through (for the layer's `Debug`).
    fn missing(&self) -> Option<MissingKey>;
}

/// A request without a usable key: let through, or refused.
#[allow(unreachable_pub)]
pub enum NoKey<R> {
    Skip,
    Refuse(R),
}

/// Keys from the user's extractor.
#[allow(unreachable_pub)]
pub struct Keys<R> {
    pub(crate) extractor: Arc<dyn KeyExtractor>,
    pub(crate) missing: MissingKey,
    /// The middleware's rejection of a request without a usable key.
    pub(crate) refuse: fn(KeyError) -> R,
    /// Keys let through unchecked or refused outright, if any.
    pub(crate) exemptions: Option<Arc<Exemptions>>,
    /// The middleware's rejection of a key on the deny list.
    pub(crate) deny: fn(Key) -> R,
}

impl<R: 'static> KeySource<R> for Keys<R> {
    type Key = Key;

    #[inline]
    fn key(&self, parts: &Parts) -> Result<Key, NoKey<R>> {
        let key = self.extractor.extract(parts).map_err(|err| {
            // Only a request with nothing to key on may pass unlimited: an invalid key (a header
            // sent twice, an unusable forwarded hop) is the client's own doing, and skipping it
            // would let a client escape its limit at will.
            if self.missing == MissingKey::Skip && err.kind() == KeyErrorKind::Missing {
                NoKey::Skip
            } else {
                NoKey::Refuse((self.refuse)(err))
            }
        })?;
        match self.exemptions.as_deref().map(|lists| lists.listed(&key)) {
            Some(Listed::Allowed) => Err(NoKey::Skip),
            Some(Listed::Denied) => Err(NoKey::Refuse((self.deny)(key))),
            Some(Listed::Neither) | None => Ok(key),
        }
    }

    fn missing(&self) -> Option<MissingKey> {
        Some(self.missing)
    }
}

/// No keys: every request is checked alike (the load shedders).
#[cfg(feature = "shed")]
#[allow(unreachable_pub)]
pub struct NoKeys;

#[cfg(feature = "shed")]
impl<R> KeySource<R> for NoKeys {
    type Key = ();

    fn key(&self, _: &Parts) -> Result<(), NoKey<R>> {
        Ok(())
    }

    fn missing(&self) -> Option<MissingKey> {
        None
    }
}
