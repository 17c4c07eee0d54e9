//! The forms in which a client key is stored: verbatim when short, else a digest, in spaces that
//! never meet.
//!
//! Bounding the stored key bounds memory per key: a 60 KB header value does not become a 60 KB map
//! entry or Redis key. A digest must never equal a key a client can send, or a client that sends
//! another client's digest as its own key would share that client's counters and slots.
//!
//! - The memory store keeps keys of up to 64 bytes as they are, and longer ones as a 128-bit keyed
//!   hash padded with zeros to 65 bytes ([`bounded`]): longer than any key kept as it is, so never
//!   equal to one, and a verbatim key is looked up exactly as before, with no tag to compare. Its
//!   keys never leave the process, so a hash keyed with per-process secret keys (SipHash, as std's
//!   `HashMap` uses against chosen keys) is as good as a cryptographic digest here, and keeps
//!   SHA-256 out of builds without Redis.
//! - Redis keys ([`StorageKey`]) are printable and free of the `{` `}` that delimit the cluster
//!   hash tag; digests there start with `#`, which no verbatim key may contain.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::LazyLock;

use crate::key::Key;

/// Keys up to this many bytes are stored as they are.
const MAX_VERBATIM: usize = 64;

/// The length of a digest in the memory store: one more than any verbatim key.
const DIGEST_LEN: usize = MAX_VERBATIM + 1;

/// The key's bytes when short, else a digest of them that no short key can equal: what the memory
/// store keeps.
#[inline]
pub(crate) fn bounded(key: &Key) -> Cow<'_, [u8]> {
    let bytes = key.as_bytes();
    if bytes.len() <= MAX_VERBATIM {
        Cow::Borrowed(bytes)
    } else {
        Cow::Owned(keyed_digest(bytes))
    }
}

/// Two SipHash-1-3 hashers with independent random keys, drawn once per process.
static DIGEST_KEYS: LazyLock<[std::collections::hash_map::RandomState; 2]> =
    LazyLock::new(Default::default);

/// 128 bits of keyed hash (two independent 64-bit SipHash values), then zeros up to
/// [`DIGEST_LEN`].
#[cold]
fn keyed_digest(bytes: &[u8]) -> Vec<u8> {
    let mut digest = vec![0; DIGEST_LEN];
    for (half, keys) in digest.chunks_exact_mut(8).zip(DIGEST_KEYS.iter()) {
        half.copy_from_slice(&keys.hash_one(bytes).to_le_bytes());
    }
    digest
}

/// A client key in the form of a Redis key part: the key itself when it is kept verbatim (a
/// shared reference to its bytes, no copy), else its digest.
#[cfg(feature = "redis")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StorageKey(Form);

#[cfg(feature = "redis")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Form {
    /// Printable ASCII, checked by `verbatim`.
    Verbatim(Key),
    Digest(Box<str>),
}

#[cfg(feature = "redis")]
impl StorageKey {
    pub(crate) fn new(key: &Key) -> Self {
        let bytes = key.as_bytes();
        match verbatim(bytes) {
            Some(_) => StorageKey(Form::Verbatim(key.clone())),
            None => StorageKey(Form::Digest(sha256_digest(bytes).into())),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match &self.0 {
            // Checked printable ASCII when made, so this never falls back.
            Form::Verbatim(key) => std::str::from_utf8(key.as_bytes()).unwrap_or_default(),
            Form::Digest(digest) => digest,
        }
    }

    /// Whether `stored` is the storage form of `key`, without allocating for a short key (a
    /// reset compares every remembered key with the one it names).
    pub(crate) fn names(stored: &str, key: &Key) -> bool {
        let bytes = key.as_bytes();
        match verbatim(bytes) {
            Some(text) => stored == text,
            None => stored.starts_with('#') && sha256_digest(bytes) == stored,
        }
    }
}

/// The key as text if it is kept verbatim: 1 to 64 bytes of printable ASCII except the hash-tag
/// braces and `#`, which marks digests (so no verbatim key can ever equal another key's digest).
#[cfg(feature = "redis")]
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
#[cfg(feature = "redis")]
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
    fn the_memory_form_of_a_short_key_never_equals_a_digest() {
        let long = Key::from("L".repeat(100));
        let digest = bounded(&long).into_owned();
        assert_eq!(digest.len(), DIGEST_LEN);
        assert_eq!(bounded(&long), digest, "the same key, the same digest");
        assert_ne!(bounded(&Key::from("M".repeat(100))), digest);
        // Whatever a client sends that is short enough is kept as it is, and is shorter than any
        // digest: even the digest's own 16 bytes of hash, or the digest cut to 64 bytes.
        for forged in [&digest[..16], &digest[..MAX_VERBATIM]] {
            let forged = Key::from(forged);
            assert_eq!(bounded(&forged), forged.as_bytes());
            assert_ne!(bounded(&forged), digest);
        }
        // A forged key of the digest's full length is itself digested.
        assert_ne!(bounded(&Key::from(digest.clone())), digest);
    }

    #[cfg(feature = "redis")]
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

    #[cfg(feature = "redis")]
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

    #[cfg(feature = "redis")]
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
