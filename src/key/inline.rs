//! [`KeyBytes`]: a key's bytes, held in place when short, so that the key of a request costs no
//! allocation.

use bytes::Bytes;

/// Keys up to this many bytes are held in place: client addresses (an IPv6 /64 key is at most 24
/// bytes), UUIDs (36) and most API keys, as the memory store holds them in its entries.
const INLINE: usize = 38;

/// A key's bytes: in place when short, else shared (a clone is a count, not a copy).
#[derive(Clone)]
pub(super) enum KeyBytes {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Bytes),
}

impl KeyBytes {
    /// A copy of `key`: in place when short, else on the heap.
    #[inline]
    pub(super) fn copy(key: &[u8]) -> Self {
        Self::inline(key).unwrap_or_else(|| KeyBytes::Shared(Bytes::copy_from_slice(key)))
    }

    /// `key`, in place when short (its allocation freed), else kept as it is.
    pub(super) fn owned(key: Vec<u8>) -> Self {
        Self::inline(&key).unwrap_or_else(|| KeyBytes::Shared(Bytes::from(key)))
    }

    /// `key` in place, if it is short enough.
    #[inline]
    fn inline(key: &[u8]) -> Option<Self> {
        let len = u8::try_from(key.len())
            .ok()
            .filter(|_| key.len() <= INLINE)?;
        let mut bytes = [0; INLINE];
        bytes[..key.len()].copy_from_slice(key);
        Some(KeyBytes::Inline { len, bytes })
    }

    #[inline]
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KeyBytes::Shared(bytes) => bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_held_in_place_and_long_ones_shared_whatever_their_source() {
        for len in [0, 1, INLINE - 1, INLINE, INLINE + 1, 300] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for held in [KeyBytes::copy(&key), KeyBytes::owned(key.clone())] {
                assert_eq!(held.as_bytes(), key.as_slice(), "{len}");
                assert_eq!(held.clone().as_bytes(), key.as_slice(), "{len}");
                let inline = matches!(held, KeyBytes::Inline { .. });
                assert_eq!(inline, len <= INLINE, "{len}");
            }
        }
    }
}
