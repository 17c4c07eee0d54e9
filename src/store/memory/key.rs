//! The form in which the memory store keeps a client key: verbatim when short, else a digest that
//! no short key can equal.
//!
//! Bounding the stored key bounds memory per key: a 60 KB header value does not become a 60 KB map
//! entry. A digest must never equal a key a client can send, or a client that sends another
//! client's digest as its own key would share that client's counters and slots. Keys of up to 64
//! bytes are kept as they are, and longer ones as a 128-bit keyed hash padded with zeros to 65
//! bytes ([`bounded`]): longer than any key kept as it is, so never equal to one, and a verbatim
//! key is looked up exactly as before, with no tag to compare. The keys never leave the process,
//! so a hash keyed with per-process secret keys (SipHash, as std's `HashMap` uses against chosen
//! keys) is as good as a cryptographic digest here, and keeps SHA-256 out of builds without Redis.
//! (The Redis store's keys are its own:
//! `store::redis::key`.)

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
pub(super) fn bounded(key: &Key) -> Cow<'_, [u8]> {
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
}
