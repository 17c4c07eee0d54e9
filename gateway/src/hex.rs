//! Bytes as lowercase hexadecimal: the digests that name counters, buckets and logged keys.

/// The digit of each value of a half byte.
const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lowercase hexadecimal, two digits a byte, written into one allocation.
pub(crate) fn lower(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(2 * bytes.len());
    push_lower(&mut hex, bytes);
    hex
}

/// Appends `bytes` to `text` as [`lower`] writes them. A digit from a table, not `write!`'s
/// formatting machinery per byte: a request's counters are named with it (nearly 300
/// instructions a byte through `{:02x}`, a few here).
pub(crate) fn push_lower(text: &mut String, bytes: &[u8]) {
    text.reserve(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(super::lower(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(super::lower(&[]), "");
        let every: Vec<u8> = (0..=255).collect();
        let formatted: String = every.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(super::lower(&every), formatted);
    }

    #[test]
    fn appended_after_what_was_there() {
        let mut text = "e.".to_owned();
        super::push_lower(&mut text, &[0x12, 0xab]);
        assert_eq!(text, "e.12ab");
    }
}
