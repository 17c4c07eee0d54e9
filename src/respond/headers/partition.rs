//! The `pk` parameter of `RateLimit` (draft-ietf-httpapi-ratelimit-headers-10): which partition
//! of the quota a response speaks of, as a digest of the client's key that never shows the key.

use sha2::{Digest, Sha256};

use crate::key::Key;

/// Makes partition keys: SHA-256 of a secret and the client's key, its first 16 bytes. Every
/// instance given the same secret gives a client the same partition key; without the secret, a
/// key cannot be recovered by hashing guesses (an IP address, a user id).
#[derive(Clone)]
pub(crate) struct Partitioner {
    secret: Box<[u8]>,
}

/// A partition key: 16 bytes, sent as a structured-field byte sequence.
pub(crate) type Partition = [u8; 16];

impl Partitioner {
    pub(crate) fn new(secret: &[u8]) -> Self {
        Self {
            secret: secret.into(),
        }
    }

    /// The partition key of `key`.
    pub(crate) fn partition(&self, key: &Key) -> Partition {
        let mut hash = Sha256::new();
        hash.update((self.secret.len() as u64).to_be_bytes());
        hash.update(&self.secret);
        hash.update(key.as_bytes());
        let digest = hash.finalize();
        let mut partition = [0; 16];
        partition.copy_from_slice(&digest[..16]);
        partition
    }
}

impl std::fmt::Debug for Partitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Partitioner")
    }
}

/// `;pk=:<base64>:`, appended to a `RateLimit` line.
pub(crate) fn parameter(partition: &Partition) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = b";pk=:".to_vec();
    for chunk in partition.chunks(3) {
        let bytes = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]);
        for (index, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if index <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
    out.push(b':');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parameter_is_a_structured_field_byte_sequence_of_the_digest() {
        let partitioner = Partitioner::new(b"fleet secret");
        let partition = partitioner.partition(&Key::from("203.0.113.5"));
        let parameter = String::from_utf8(parameter(&partition)).unwrap();
        // As sfv serializes the same bytes.
        let mut list = sfv::ListSerializer::new();
        list.bare_item(sfv::StringRef::constant("x")).parameter(
            sfv::KeyRef::constant("pk"),
            sfv::RefBareItem::ByteSequence(&partition[..]),
        );
        let expected = list.finish().unwrap();
        assert_eq!(format!("\"x\"{parameter}"), expected);
        // The same key and secret give the same partition; another secret or key, another.
        assert_eq!(
            partition,
            Partitioner::new(b"fleet secret").partition(&Key::from("203.0.113.5"))
        );
        assert_ne!(
            partition,
            Partitioner::new(b"other").partition(&Key::from("203.0.113.5"))
        );
        assert_ne!(partition, partitioner.partition(&Key::from("203.0.113.6")));
        assert!(!parameter.contains("203"));
    }
}
