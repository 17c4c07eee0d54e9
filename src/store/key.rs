//! The forms in which a client key is stored: verbatim when short, else a digest, in spaces that
//! never meet.
//!
//! Bounding the stored key bounds memory per key: a 60 KB header value does not become a 60 KB map
//! entry or Redis key. A digest must never equal a key a client can send, or a client that sends
//! another client's digest as its own key would share that client's counters and slots: so every
//! form says which it is.
//!
//! - The memory store keeps keys of up to 64 bytes as they are and longer ones as a 128-bit keyed
//!   hash, each tagged ([`BoundedKey`]). Its keys never leave the process, so a hash keyed with
//!   per-process secret keys (SipHash, as std's `HashMap` uses against chosen keys) is as good as
//!   a cryptographic digest here, and keeps SHA-256 out of builds without Redis.
//! - Redis keys ([`StorageKey`]) are printable and free of the `{` `}` that delimit the cluster
//!   hash tag; digests there start with `#`, which no verbatim key may contain.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::LazyLock;

use crate::key::Key;

/// Keys up to this many bytes are stored as they are.
const MAX_VERBATIM: usize = 64;

/// A client key as the memory store keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoundedKey<'a> {
    /// Up to [`MAX_VERBATIM`] bytes, as sent.
    Verbatim(&'a [u8]),
    /// A 128-bit keyed hash of a longer key.
    Digest([u8; 16]),
}

impl<'a> BoundedKey<'a> {
    pub(crate) fn new(key: &'a Key) -> Self {
        let bytes = key.as_bytes();
        if bytes.len() <= MAX_VERBATIM {
            BoundedKey::Verbatim(bytes)
        } else {
            BoundedKey::Digest(keyed_digest(bytes))
        }
    }

    /// Whether the key is a digest, and its bytes.
    #[inline]
    pub(crate) fn parts(&self) -> (bool, &[u8]) {
        match self {
            BoundedKey::Verbatim(bytes) => (false, bytes),
            BoundedKey::Digest(digest) => (true, digest),
        }
    }

    /// The key as one byte string that says which form it is: a tag byte, then the bytes.
    #[cfg(feature = "concurrency")]
    pub(crate) fn tagged(&self, out: &mut impl Extend<u8>) {
        match self {
            BoundedKey::Verbatim(bytes) => {
                out.extend([b'v']);
                out.extend(bytes.iter().copied());
            }
            BoundedKey::Digest(digest) => {
                out.extend([b'#']);
                out.extend(digest.iter().copied());
            }
        }
    }
}

/// Hashes the bytes as a slice hashes (length, then bytes: with the memory store's hasher, the
/// length mixed in first spreads short keys well over the shards and table groups; a bare `write`
/// of the bytes measured a sixth slower with many keys). Equal hashes are told apart by
/// `PartialEq`, which compares the forms too, so the form itself need not be hashed.
impl Hash for BoundedKey<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            BoundedKey::Verbatim(bytes) => bytes.hash(state),
            BoundedKey::Digest(digest) => digest[..].hash(state),
        }
    }
}

/// Two SipHash-1-3 hashers with independent random keys, drawn once per process.
static DIGEST_KEYS: LazyLock<[std::collections::hash_map::RandomState; 2]> =
    LazyLock::new(Default::default);

/// 128 bits of keyed hash: two independent 64-bit SipHash values.
fn keyed_digest(bytes: &[u8]) -> [u8; 16] {
    let mut digest = [0; 16];
    for (half, keys) in digest.chunks_exact_mut(8).zip(DIGEST_KEYS.iter()) {
        half.copy_from_slice(&keys.hash_one(bytes).to_le_bytes());
    }
    digest
}

/// A client key in the form of a Redis key part.
#[cfg(feature = "redis")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StorageKey(Box<str>);

#[cfg(feature = "redis")]
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
            _ => StorageKey(sha256_digest(bytes).into()),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Printable ASCII except the hash-tag braces and `#`, which marks digests (so no verbatim key can
/// ever equal another key's digest).
#[cfg(feature = "redis")]
fn is_verbatim(byte: u8) -> bool {
    byte.is_ascii_graphic() && !matches!(byte, b'{' | b'}' | b'#')
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
        let BoundedKey::Digest(digest) = BoundedKey::new(&long) else {
            panic!("a long key is digested");
        };
        assert_eq!(BoundedKey::new(&long), BoundedKey::Digest(digest));
        // Whatever a client sends that is short enough, it is kept verbatim: even the digest's
        // own bytes, or any text spelling them.
        let forged = Key::from(&digest[..]);
        assert_eq!(BoundedKey::new(&forged), BoundedKey::Verbatim(&digest));
        assert_ne!(BoundedKey::new(&forged), BoundedKey::new(&long));
        let other = Key::from("M".repeat(100));
        assert_ne!(BoundedKey::new(&other), BoundedKey::new(&long));
    }

    #[cfg(feature = "concurrency")]
    #[test]
    fn the_tagged_form_tells_a_digest_from_its_bytes() {
        let long = Key::from("L".repeat(100));
        let BoundedKey::Digest(digest) = BoundedKey::new(&long) else {
            panic!("a long key is digested");
        };
        let forged = Key::from(&digest[..]);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        BoundedKey::new(&forged).tagged(&mut a);
        BoundedKey::new(&long).tagged(&mut b);
        assert_ne!(a, b);
        assert_eq!(a.len(), b.len(), "same length, told apart by the tag alone");
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
}
