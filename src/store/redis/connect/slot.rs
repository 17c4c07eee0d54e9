//! The Redis Cluster hash slot of a client's keys: CRC16 (XMODEM) of the hash tag, modulo 16384.
//!
//! Every key of a client is `...:{<storage key>}` (prefixes, rule names and state codes hold no
//! braces, and storage keys none either), so its tag is the storage key itself.
//!
//! Also the other way round, for a key that must exist in every slot (a ledger's birth on a
//! cluster, `store::region`): a short tag per slot (`tag`).

#[cfg(feature = "regions")]
use std::sync::OnceLock;

/// How many slots a cluster has.
pub(in crate::store) const SLOTS: u16 = 16_384;

/// The slot of the keys whose hash tag is `tag`.
pub(in crate::store) fn of(tag: &str) -> u16 {
    crc16(tag.as_bytes()) % SLOTS
}

/// A hash tag whose slot is `slot` (below [`SLOTS`]): the smallest decimal number that falls in
/// it. Found once, for every slot, by trying the numbers in turn (109 758 of them); the
/// same on every host and in every version, since keys written by one process are read by
/// another.
#[cfg(feature = "regions")]
pub(in crate::store) fn tag(slot: u16) -> &'static str {
    static TAGS: OnceLock<Vec<Box<str>>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags: Vec<Option<Box<str>>> = vec![None; usize::from(SLOTS)];
        let mut missing = usize::from(SLOTS);
        let mut number = 0_u64;
        while missing > 0 {
            let text = number.to_string();
            let found = &mut tags[usize::from(of(&text))];
            if found.is_none() {
                *found = Some(text.into());
                missing -= 1;
            }
            number += 1;
        }
        tags.into_iter().map(Option::unwrap_or_default).collect()
    });
    &tags[usize::from(slot % SLOTS)]
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

    #[cfg(feature = "regions")]
    #[test]
    fn every_slot_has_a_tag_of_its_own() {
        for slot in 0..SLOTS {
            assert_eq!(of(tag(slot)), slot, "{}", tag(slot));
        }
        assert!((0..SLOTS).all(|slot| tag(slot).len() <= 6));
        // Stable: keys written with these tags are read by other processes and versions.
        assert_eq!((tag(0), tag(of("7"))), ("3560", "7"));
    }
}
