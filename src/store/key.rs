//! The form in which a client key is stored: verbatim when short, else a digest.
//!
//! Bounding the stored key bounds memory per key: a 60 KB header value does not become a 60 KB
//! map entry or Redis key. Redis key names are also kept printable and free of the `{` `}` that
//! delimit the cluster hash tag ([`StorageKey`]); the memory store only needs the bound
//! ([`bounded`]).

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use crate::key::Key;

/// Keys up to this many bytes are stored as they are, when printable.
const MAX_VERBATIM: usize = 64;

/// A client key in stored form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StorageKey(Box<str>);

impl StorageKey {
    pub(crate) fn new(key: &Key) -> Self {
        let bytes = key.as_bytes();
        match std::str::from_utf8(bytes) {
            Ok(text)
                if bytes.len() <= MAX_VERBATIM
                    && !bytes.is_empty()
                    && bytes.iter().all(|&b| is_verbatim(b)) =>
            {
                StorageKey(text.into())
            }
            _ => StorageKey(digest(bytes).into()),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key's bytes when short, else their digest: what the memory store keeps.
pub(crate) fn bounded(key: &Key) -> Cow<'_, [u8]> {
    let bytes = key.as_bytes();
    if bytes.len() <= MAX_VERBATIM {
        Cow::Borrowed(bytes)
    } else {
        Cow::Owned(digest(bytes).into_bytes())
    }
}

/// Printable ASCII except the hash-tag braces and `#`, which marks digests (so no verbatim key can
/// ever equal another key's digest).
fn is_verbatim(byte: u8) -> bool {
    byte.is_ascii_graphic() && !matches!(byte, b'{' | b'}' | b'#')
}

/// `#` and 128 bits of SHA-256 in hex: collision-resistant even against chosen keys.
fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut text = String::with_capacity(33);
    text.push('#');
    for byte in &hash[..16] {
        text.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        text.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_printable_keys_are_kept_verbatim() {
        assert_eq!(
            StorageKey::new(&Key::from("203.0.113.5")).as_str(),
            "203.0.113.5"
        );
        assert_eq!(
            StorageKey::new(&Key::from("2001:db8::/64")).as_str(),
            "2001:db8::/64"
        );
    }

    #[test]
    fn long_binary_braced_or_hash_keys_become_digests() {
        for key in [
            Key::from("x".repeat(65)),
            Key::from(vec![0u8, 1, 2]),
            Key::from("a{b}"),
            Key::from("#abc"),
            Key::from("with space"),
            Key::from(""),
        ] {
            let stored = StorageKey::new(&key);
            assert!(
                stored.as_str().starts_with('#') && stored.as_str().len() == 33,
                "{key:?} -> {stored:?}"
            );
        }
        assert_ne!(
            StorageKey::new(&Key::from("a{b}")),
            StorageKey::new(&Key::from("a{c}"))
        );
    }
}
