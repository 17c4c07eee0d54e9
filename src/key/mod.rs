//! Who is being limited: extracting a client key from a request.
//!
//! A [`KeyExtractor`] looks at the request head ([`http::request::Parts`], never the body) and
//! returns a [`Key`], or a [`KeyError`] saying what was missing or malformed. Built in:
//!
//! | extractor | key |
//! |---|---|
//! | [`HeaderKey`] | one or several request headers (e.g. an API key) |
//! | [`ClientIp`] | the client address: the peer, or behind trusted proxies the rightmost untrusted forwarded address; IPv6 grouped by prefix |
//! | [`UserId`] / [`ExtensionKey`] | a value an earlier authentication layer put into the request extensions |
//! | [`GlobalKey`] | one key for every request (a limit for the whole service) |
//! | [`from_fn`] | whatever a closure of the request head returns |
//!
//! [`KeyExtractorExt::or`] tries a second extractor when the first finds no key:
//!
//! ```
//! use tower_redis_ratelimit::key::{ClientIp, HeaderKey, KeyExtractorExt};
//!
//! // Limit by API key when there is one, by client address otherwise.
//! let key = HeaderKey::new("x-api-key").or(ClientIp::peer());
//! ```

mod client_ip;
mod exemptions;
mod extension;
mod forwarded;
mod function;
mod global;
mod header;
mod inline;

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};

use bytes::Bytes;
use http::request::Parts;

pub use client_ip::{ClientIp, ForwardedHeader};
pub use exemptions::Exemptions;
pub(crate) use exemptions::Listed;
pub use extension::{ExtensionKey, UserId};
pub use function::{FromFn, KeyResult, from_fn};
pub use global::GlobalKey;
pub use header::HeaderKey;
use inline::KeyBytes;

/// The identity a limit is counted against: bytes, usually text (an IP address, an API key).
///
/// Stores bound what they keep: long or binary keys are replaced by a digest before they are
/// stored, so a key's size never matters. A short key (up to 38 bytes) is held in place, so
/// extracting one from a request allocates nothing.
#[derive(Clone)]
pub struct Key(KeyBytes);

impl Key {
    /// A key from a static string, without allocating.
    pub const fn from_static(key: &'static str) -> Self {
        Key(KeyBytes::Shared(Bytes::from_static(key.as_bytes())))
    }

    /// The key's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

// Keys compare, order and hash as their bytes, however they are held.
impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

impl From<String> for Key {
    fn from(key: String) -> Self {
        Key(KeyBytes::owned(key.into_bytes()))
    }
}

impl From<&str> for Key {
    fn from(key: &str) -> Self {
        Key(KeyBytes::copy(key.as_bytes()))
    }
}

impl From<Vec<u8>> for Key {
    fn from(key: Vec<u8>) -> Self {
        Key(KeyBytes::owned(key))
    }
}

impl From<&[u8]> for Key {
    #[inline]
    fn from(key: &[u8]) -> Self {
        Key(KeyBytes::copy(key))
    }
}

impl From<Bytes> for Key {
    fn from(key: Bytes) -> Self {
        Key(KeyBytes::Shared(key))
    }
}

/// Why no key could be extracted. The layer answers 400 with this message by default.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct KeyError {
    kind: KeyErrorKind,
    message: Cow<'static, str>,
}

/// Whether the key was absent or present but unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyErrorKind {
    /// The request carries nothing to key on (no such header, no peer address, no user).
    /// [`KeyExtractorExt::or`] tries its second extractor only for this kind.
    Missing,
    /// The request carries a key that cannot be used (ambiguous or malformed). Never falls back to
    /// another extractor: that would let a client choose which limit it is counted against.
    Invalid,
}

impl KeyError {
    /// Nothing to key on; `message` says what was expected, e.g. "header `x-api-key` is missing".
    pub fn missing(message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: KeyErrorKind::Missing,
            message: message.into(),
        }
    }

    /// A present but unusable key; `message` says why.
    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: KeyErrorKind::Invalid,
            message: message.into(),
        }
    }

    /// Missing or invalid.
    pub fn kind(&self) -> KeyErrorKind {
        self.kind
    }

    /// What went wrong, for the client.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Finds the key a request is counted against.
///
/// Closures `Fn(&Parts) -> Result<Key, KeyError>` are extractors too; [`from_fn`] takes one whose
/// argument needs no type annotation.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key, or why there is none.
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError>;

    /// How this extractor finds a request's client address, if it does: a layer's allow and deny
    /// networks ([`Exemptions`]) match the client address it finds, whatever the key of the
    /// request. [`ClientIp`] is such an extractor, and so is an [`or`](KeyExtractorExt::or) of
    /// one (the first that is); the others, by default, are not.
    fn client_ip(&self) -> Option<&ClientIp> {
        None
    }
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<Key, KeyError> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        self(parts)
    }
}

impl<K: KeyExtractor + ?Sized> KeyExtractor for std::sync::Arc<K> {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        (**self).extract(parts)
    }

    fn client_ip(&self) -> Option<&ClientIp> {
        (**self).client_ip()
    }
}

/// Combinators on key extractors.
pub trait KeyExtractorExt: KeyExtractor + Sized {
    /// Uses `other` when this extractor finds no key ([`KeyErrorKind::Missing`]). An invalid key
    /// is an error of its own and does not fall back.
    fn or<K: KeyExtractor>(self, other: K) -> Or<Self, K> {
        Or {
            first: self,
            second: other,
        }
    }
}

impl<K: KeyExtractor> KeyExtractorExt for K {}

/// Tries one extractor, then another. Made by [`KeyExtractorExt::or`].
#[derive(Clone, Debug)]
pub struct Or<A, B> {
    first: A,
    second: B,
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for Or<A, B> {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        match self.first.extract(parts) {
            Err(err) if err.kind() == KeyErrorKind::Missing => self.second.extract(parts),
            result => result,
        }
    }

    fn client_ip(&self) -> Option<&ClientIp> {
        self.first.client_ip().or_else(|| self.second.client_ip())
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use http::request::Parts;

    /// The head of a GET request with the given headers.
    pub(crate) fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::builder().uri("/");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("valid request").into_parts().0
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::parts;
    use super::*;

    #[test]
    fn or_falls_back_only_when_the_key_is_missing() {
        let key = HeaderKey::new("x-api-key").or(GlobalKey::new("everyone"));
        assert_eq!(
            key.extract(&parts(&[("x-api-key", "abc")])).unwrap(),
            Key::from("abc")
        );
        assert_eq!(key.extract(&parts(&[])).unwrap(), Key::from("everyone"));
        let ambiguous = parts(&[("x-api-key", "abc"), ("x-api-key", "def")]);
        assert_eq!(
            key.extract(&ambiguous).unwrap_err().kind(),
            KeyErrorKind::Invalid
        );
    }

    #[test]
    fn closures_are_extractors() {
        let by_path = |parts: &Parts| Ok(Key::from(parts.uri.path()));
        assert_eq!(by_path.extract(&parts(&[])).unwrap(), Key::from("/"));
    }
}
