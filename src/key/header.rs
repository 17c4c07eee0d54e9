//! Keys from request headers, e.g. an API key.

use bytes::BytesMut;
use http::HeaderName;
use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};
use crate::error::{ConfigError, KeyConfigError};

/// Keys a request by the value of one or more headers, e.g. an API key.
///
/// Each header must appear exactly once with a non-blank value (surrounding whitespace is
/// trimmed). A missing or blank header is [missing](super::KeyErrorKind::Missing); a header sent
/// twice is [invalid](super::KeyErrorKind::Invalid), since letting a client pick which of two
/// values counts would let it pick a fresh limit.
///
/// Several headers are joined with the byte 0x1F (unit separator), which no header value can
/// contain, so `("a-b", "c")` and `("a", "b-c")` never share a key.
///
/// ```
/// use tower_redis_ratelimit::key::{HeaderKey, KeyExtractor};
///
/// let key = HeaderKey::new("x-api-key");
/// let request = http::Request::get("/").header("x-api-key", " k1 ").body(()).unwrap();
/// assert_eq!(key.extract(&request.into_parts().0).unwrap().as_bytes(), b"k1");
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    names: Vec<HeaderName>,
}

const SEPARATOR: u8 = 0x1f;

impl HeaderKey {
    /// Keys by the header `name` (case-insensitive).
    ///
    /// # Panics
    ///
    /// If `name` is not a valid header name; use [`HeaderKey::try_new`] for names read at runtime.
    pub fn new(name: &str) -> Self {
        match Self::try_new(name) {
            Ok(key) => key,
            Err(err) => panic!("{err}"),
        }
    }

    /// Keys by the header `name`, or says why the name is invalid.
    pub fn try_new(name: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            names: vec![parse_name(name)?],
        })
    }

    /// Also requires the header `name`; the key joins all values in order.
    ///
    /// # Panics
    ///
    /// If `name` is not a valid header name.
    pub fn and(mut self, name: &str) -> Self {
        match parse_name(name) {
            Ok(name) => self.names.push(name),
            Err(err) => panic!("{err}"),
        }
        self
    }
}

fn parse_name(name: &str) -> Result<HeaderName, ConfigError> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        KeyConfigError::InvalidHeaderName {
            name: name.to_owned(),
        }
        .into()
    })
}

impl KeyExtractor for HeaderKey {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        if let [name] = self.names.as_slice() {
            return single_value(parts, name).map(Key::from);
        }
        let mut joined = BytesMut::new();
        for (index, name) in self.names.iter().enumerate() {
            if index > 0 {
                joined.extend_from_slice(&[SEPARATOR]);
            }
            joined.extend_from_slice(single_value(parts, name)?);
        }
        Ok(Key::from(joined.freeze()))
    }
}

fn single_value<'a>(parts: &'a Parts, name: &HeaderName) -> Result<&'a [u8], KeyError> {
    let mut values = parts.headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Err(KeyError::missing(format!("the `{name}` header is missing")));
    };
    if values.next().is_some() {
        return Err(KeyError::invalid(format!(
            "the `{name}` header must appear only once"
        )));
    }
    let value = value.as_bytes().trim_ascii();
    if value.is_empty() {
        return Err(KeyError::missing(format!("the `{name}` header is empty")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;
    use crate::key::test_support::parts;

    #[test]
    fn missing_blank_and_repeated_headers_are_reported() {
        let key = HeaderKey::new("X-Api-Key");
        let err = key.extract(&parts(&[])).unwrap_err();
        assert_eq!(
            (err.kind(), err.message()),
            (KeyErrorKind::Missing, "the `x-api-key` header is missing")
        );
        let err = key.extract(&parts(&[("x-api-key", "   ")])).unwrap_err();
        assert_eq!(err.kind(), KeyErrorKind::Missing);
        let err = key
            .extract(&parts(&[("x-api-key", "a"), ("X-API-KEY", "b")]))
            .unwrap_err();
        assert_eq!(err.kind(), KeyErrorKind::Invalid);
    }

    #[test]
    fn several_headers_join_unambiguously() {
        let key = HeaderKey::new("x-a").and("x-b");
        let one = key
            .extract(&parts(&[("x-a", "p-q"), ("x-b", "r")]))
            .unwrap();
        let two = key
            .extract(&parts(&[("x-a", "p"), ("x-b", "q-r")]))
            .unwrap();
        assert_ne!(one, two);
        assert_eq!(one.as_bytes(), b"p-q\x1fr");
        assert_eq!(
            key.extract(&parts(&[("x-a", "p")])).unwrap_err().message(),
            "the `x-b` header is missing"
        );
    }

    #[test]
    fn invalid_names_are_configuration_errors() {
        assert!(matches!(
            HeaderKey::try_new("bad name"),
            Err(ConfigError::KeyExtractor(_))
        ));
    }
}
