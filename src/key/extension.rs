//! Keys from values that an earlier layer put into the request extensions (e.g. authentication).

use std::fmt;
use std::marker::PhantomData;

use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// The authenticated user's id, for an authentication layer to insert into the request
/// extensions before the rate limit runs; [`UserId::key`] then keys requests by it.
///
/// ```
/// use tower_redis_ratelimit::key::{KeyExtractor, UserId};
///
/// let mut request = http::Request::get("/").body(()).unwrap();
/// request.extensions_mut().insert(UserId::new("user-42"));
/// let key = UserId::key().extract(&request.into_parts().0).unwrap();
/// assert_eq!(key.as_bytes(), b"user-42");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserId(Key);

impl UserId {
    /// A user id.
    pub fn new(id: impl Into<Key>) -> Self {
        UserId(id.into())
    }

    /// The extractor keying requests by the [`UserId`] in their extensions. Requests without one
    /// (not authenticated) have no key.
    pub fn key() -> ExtensionKey<UserId, fn(&UserId) -> Key> {
        ExtensionKey::new(|user: &UserId| user.0.clone())
    }
}

/// Keys requests by a value of type `T` in their extensions, mapped to a key by a function.
///
/// ```
/// use tower_redis_ratelimit::key::{ExtensionKey, Key};
///
/// #[derive(Clone)]
/// struct Account { id: u64 }
///
/// let key = ExtensionKey::new(|account: &Account| Key::from(account.id.to_string()));
/// ```
pub struct ExtensionKey<T, F> {
    to_key: F,
    _type: PhantomData<fn(&T)>,
}

impl<T, F> ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> Key + Send + Sync + 'static,
{
    /// Keys by the extension of type `T`, turned into a key by `to_key`.
    pub fn new(to_key: F) -> Self {
        Self {
            to_key,
            _type: PhantomData,
        }
    }
}

impl<T, F> KeyExtractor for ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> Key + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        match parts.extensions.get::<T>() {
            Some(value) => Ok((self.to_key)(value)),
            None => Err(KeyError::missing(format!(
                "the request carries no {} (is the authentication layer in front of the rate limit?)",
                short_type_name::<T>()
            ))),
        }
    }
}

impl<T, F: Clone> Clone for ExtensionKey<T, F> {
    fn clone(&self) -> Self {
        Self {
            to_key: self.to_key.clone(),
            _type: PhantomData,
        }
    }
}

impl<T, F> fmt::Debug for ExtensionKey<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtensionKey")
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

fn short_type_name<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::key::test_support::parts;

    #[test]
    fn a_request_without_the_extension_has_no_key() {
        let err = UserId::key().extract(&parts(&[])).unwrap_err();
        assert_eq!(err.kind(), KeyErrorKind::Missing);
        assert!(err.message().contains("UserId"), "{}", err.message());
    }
}
