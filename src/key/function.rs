//! [`from_fn`]: a key extractor from a closure, whose argument needs no type annotation.

use std::fmt;

use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// Keys requests with a closure of the request head. The closure returns an `Option` (no key is
/// [missing](super::KeyErrorKind::Missing)) or a `Result` with a [`KeyError`] of its own, of
/// anything that converts into a [`Key`].
///
/// ```
/// use tower_redis_ratelimit::key::{self, Key, KeyExtractor};
///
/// // Per tenant, named by the first segment of the path.
/// let tenant = key::from_fn(|parts| {
///     parts.uri.path().split('/').nth(1).filter(|s| !s.is_empty()).map(Key::from)
/// });
/// let request = http::Request::get("/acme/orders").body(()).unwrap();
/// assert_eq!(tenant.extract(&request.into_parts().0).unwrap(), Key::from("acme"));
/// ```
///
/// # Inside `Router::nest`
///
/// A layer inside a router nested with axum's `Router::nest("/api", ...)` sees the request as
/// the nested router does: without the prefix (`/users`, not `/api/users`). The closure reads
/// the whole path from axum's `OriginalUri` in the extensions (axum's `original-uri` feature, on
/// by default). The same holds for a rate limit's
/// [`cost`](crate::rate::RateLimitLayerBuilder::cost) closure.
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use axum::{Router, extract::OriginalUri, routing::get};
/// use tower::ServiceExt;
/// use tower_redis_ratelimit::key::{self, Key};
/// use tower_redis_ratelimit::{Quota, RateLimitLayer, Rule};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let record = seen.clone();
/// let limit = RateLimitLayer::builder()
///     .rule(Rule::fixed_window("api", Quota::per_minute(10)))
///     .key(key::from_fn(move |parts| {
///         let original = parts.extensions.get::<OriginalUri>().map(|uri| uri.path().to_owned());
///         record.lock().unwrap().push((parts.uri.path().to_owned(), original));
///         Some(Key::from("tenant"))
///     }))
///     .build()?;
/// let api = Router::new().route("/users", get(|| async { "users" })).layer(limit);
/// let app: Router = Router::new().nest("/api", api);
///
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let request = http::Request::get("/api/users").body(axum::body::Body::empty())?;
/// assert_eq!(app.oneshot(request).await?.status(), 200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// // The closure saw the path without the prefix; `OriginalUri` holds the whole one.
/// assert_eq!(
///     seen.lock().unwrap()[0],
///     ("/users".to_owned(), Some("/api/users".to_owned()))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn from_fn<F, R>(key: F) -> FromFn<F>
where
    F: Fn(&Parts) -> R + Send + Sync + 'static,
    R: KeyResult,
{
    FromFn(key)
}

/// A key extractor made from a closure by [`from_fn`].
#[derive(Clone)]
pub struct FromFn<F>(F);

impl<F, R> KeyExtractor for FromFn<F>
where
    F: Fn(&Parts) -> R + Send + Sync + 'static,
    R: KeyResult,
{
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        (self.0)(parts).into_key_result()
    }
}

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FromFn").finish_non_exhaustive()
    }
}

/// What a [`from_fn`] closure may return: `Option<K>` or `Result<K, KeyError>`, for any `K` that
/// converts into a [`Key`].
pub trait KeyResult {
    /// The key, or why there is none.
    fn into_key_result(self) -> Result<Key, KeyError>;
}

impl<K: Into<Key>> KeyResult for Option<K> {
    fn into_key_result(self) -> Result<Key, KeyError> {
        self.map(Into::into)
            .ok_or_else(|| KeyError::missing("the key function found no key in this request"))
    }
}

impl<K: Into<Key>> KeyResult for Result<K, KeyError> {
    fn into_key_result(self) -> Result<Key, KeyError> {
        self.map(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::key::test_support::parts;

    #[test]
    fn a_closure_without_annotations_keys_requests() {
        let by_header =
            from_fn(|parts| parts.headers.get("x-tenant").map(|v| v.as_bytes().to_vec()));
        assert_eq!(
            by_header.extract(&parts(&[("x-tenant", "acme")])).unwrap(),
            Key::from("acme")
        );
        let err = by_header.extract(&parts(&[])).unwrap_err();
        assert_eq!(err.kind(), KeyErrorKind::Missing);
        let strict = from_fn(
            |parts| match parts.headers.get_all("x-tenant").iter().count() {
                1 => Ok(Key::from("one")),
                _ => Err(KeyError::invalid("send `x-tenant` exactly once")),
            },
        );
        assert_eq!(
            strict.extract(&parts(&[])).unwrap_err().kind(),
            KeyErrorKind::Invalid
        );
    }
}
