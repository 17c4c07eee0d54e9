//! The Redis Cluster hash slot of a client's keys: CRC16 (XMODEM) of the hash tag, modulo 16384.
//!
//! Every key of a client is `...:{<storage key>}` (prefixes, rule names and state codes hold no
//! braces, and storage keys none either), so its tag is the storage key itself.

/// How many slots a cluster has.
const SLOTS: u16 = 16_384;

/// The slot of the keys whose hash tag is `tag`.
pub(in crate::store::redis) fn of(tag: &str) -> u16 {
    crc16(tag.as_bytes()) % SLOTS
}

/// CRC-16/XMODEM (polynomial 0x1021, no reflection, initial value 0), as Redis Cluster
/// computes it.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0_u16, |crc, &byte| {
        let mut crc = crc ^ (u16::from(byte) << 8);
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
        crc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots Redis's own `CLUSTER KEYSLOT` gives (its documentation's examples, and the
    /// check value of CRC-16/XMODEM).
    #[test]
    fn slots_are_those_redis_computes() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(of("somekey"), 11_058);
        assert_eq!(of("foo"), 12_182);
        assert_eq!(of("user1000"), 3_443);
    }
}
