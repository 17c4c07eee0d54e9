//! Bytes as lowercase hexadecimal: the digests that name counters, buckets and logged keys.

use std::fmt::Write as _;

/// `bytes` as lowercase hexadecimal, two digits a byte, written into one allocation.
pub(crate) fn lower(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(super::lower(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(super::lower(&[]), "");
    }
}
