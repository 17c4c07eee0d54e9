//! [`StorageKey`]: the form in which a client key is part of a Redis key, verbatim when short
//! and printable, else a digest, in spaces that never meet.
//!
//! Bounding the stored key bounds memory per key: a 60 KB header value does not become a 60 KB
//! Redis key. A digest must never equal a key a client can send, or a client that sends another
//! client's digest as its own key would share that client's counters and slots. Redis keys are
//! printable and free of the `{` `}` that delimit the cluster hash tag; digests start with `#`,
//! which no verbatim key may contain. A digest is SHA-256, the same in every process that shares
//! the Redis server. (The memory store bounds its keys in its own way:
//! `store::memory::key`.)

use crate::key::Key;

/// Keys up to this many bytes are kept as they are.
const MAX_VERBATIM: usize = 64;

/// A client key in the form of a Redis key part: the key itself when it is kept verbatim (a
/// shared reference to its bytes, no copy), else its digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(in crate::store) struct StorageKey(Form);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Form {
    /// Printable ASCII, checked by `verbatim`.
    Verbatim(Key),
    Digest(Box<str>),
}

impl StorageKey {
    pub(in crate::store) fn new(key: &Key) -> Self {
        let bytes = key.as_bytes();
        match verbatim(bytes) {
            Some(_) => StorageKey(Form::Verbatim(key.clone())),
            None => StorageKey(Form::Digest(sha256_digest(bytes).into())),
        }
    }

    pub(in crate::store) fn as_str(&self) -> &str {
        match &self.0 {
            // Checked printable ASCII when made, so this never falls back.
            Form::Verbatim(key) => std::str::from_utf8(key.as_bytes()).unwrap_or_default(),
            Form::Digest(digest) => digest,
        }
    }

    /// Whether `stored` is the storage form of `key`, without allocating for a short key (a
    /// reset compares every remembered key with the one it names).
    pub(in crate::store) fn names(stored: &str, key: &Key) -> bool {
        let bytes = key.as_bytes();
        match verbatim(bytes) {
            Some(text) => stored == text,
            None => stored.starts_with('#') && sha256_digest(bytes) == stored,
        }
    }
}

/// The key as text if it is kept verbatim: 1 to 64 bytes of printable ASCII except the hash-tag
/// braces and `#`, which marks digests (so no verbatim key can ever equal another key's digest).
fn verbatim(bytes: &[u8]) -> Option<&str> {
    let kept = !bytes.is_empty()
        && bytes.len() <= MAX_VERBATIM
        && bytes
            .iter()
            .all(|&b| b.is_ascii_graphic() && !matches!(b, b'{' | b'}' | b'#'));
    // Printable ASCII is UTF-8.
    kept.then(|| std::str::from_utf8(bytes).ok()).flatten()
}

/// `#` and 128 bits of SHA-256 in hex: collision-resistant even against chosen keys, and the same
/// in every process that shares the Redis server.
fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
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
    fn short_printable_keys_are_kept_verbatim_in_redis() {
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
    fn long_binary_braced_or_hash_keys_become_digests_in_redis() {
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
        // A client that sends another key's digest as its own is digested in turn.
        let long = StorageKey::new(&Key::from("L".repeat(100)));
        let forged = StorageKey::new(&Key::from(long.as_str()));
        assert_ne!(forged, long);
    }

    #[test]
    fn a_storage_key_names_exactly_the_key_it_was_made_of() {
        let keys = [
            Key::from("203.0.113.5"),
            Key::from("L".repeat(100)),
            Key::from(vec![0u8, 1, 2]),
            Key::from("a{b}"),
        ];
        for key in &keys {
            let stored = StorageKey::new(key);
            for other in &keys {
                assert_eq!(StorageKey::names(stored.as_str(), other), key == other);
            }
            // A client that sends a digest's text as its own key is not named by the digest.
            if stored.as_str().starts_with('#') {
                assert!(!StorageKey::names(
                    stored.as_str(),
                    &Key::from(stored.as_str())
                ));
            }
        }
    }
}
