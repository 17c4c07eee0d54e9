//! [`Keys`]: where a keyed layer's requests get their keys.

use std::sync::Arc;

use http::request::Parts;

use super::failure::MissingKey;
use crate::key::{Exemptions, Key, KeyError, KeyErrorKind, KeyExtractor, Listed};

/// A request without a usable key: let through, or refused.
pub(crate) enum NoKey<R> {
    Skip,
    Refuse(R),
}

/// Keys from the user's extractor, with the layer's exemptions and its refusals.
pub(crate) struct Keys<R> {
    pub(crate) extractor: Arc<dyn KeyExtractor>,
    pub(crate) missing: MissingKey,
    /// The middleware's rejection of a request without a usable key.
    pub(crate) refuse: fn(KeyError) -> R,
    /// Keys let through unchecked or refused outright, if any.
    pub(crate) exemptions: Option<Arc<Exemptions>>,
    /// The middleware's rejection of a key on the deny list.
    pub(crate) deny: fn(Key) -> R,
}

impl<R> Keys<R> {
    /// The request's key, or what to do without one.
    #[inline]
    pub(crate) fn key(&self, parts: &Parts) -> Result<Key, NoKey<R>> {
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
        match self
            .exemptions
            .as_deref()
            .map(|lists| lists.listed(&key, parts))
        {
            Some(Listed::Allowed) => Err(NoKey::Skip),
            Some(Listed::Denied) => Err(NoKey::Refuse((self.deny)(key))),
            Some(Listed::Neither) | None => Ok(key),
        }
    }
}
