//! HPACK's Huffman code (RFC 7541, Appendix B), decoded: enough to read a header block's
//! strings. The code is canonical (within a length, codes rise with the symbol, and each length's
//! first code follows the last of the length before), so each symbol's code length alone
//! defines it.

use std::sync::OnceLock;

/// Each symbol's code length in bits: bytes 0 to 255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The canonical code's tables: per length, its first code, how many codes it has and where
/// its symbols start in `symbols` (sorted by length, then symbol).
struct Canonical {
    first: [u32; 31],
    count: [u32; 31],
    offset: [usize; 31],
    symbols: Vec<u16>,
}

fn canonical() -> &'static Canonical {
    static TABLE: OnceLock<Canonical> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut symbols: Vec<u16> = (0..=256).collect();
        symbols.sort_by_key(|&symbol| (LENGTHS[usize::from(symbol)], symbol));
        let mut table = Canonical {
            first: [0; 31],
            count: [0; 31],
            offset: [0; 31],
            symbols,
        };
        for &length in &LENGTHS {
            table.count[usize::from(length)] += 1;
        }
        let (mut code, mut offset) = (0u32, 0usize);
        for length in 1..=30 {
            table.first[length] = code;
            table.offset[length] = offset;
            offset += table.count[length] as usize;
            code = (code + table.count[length]) << 1;
        }
        table
    })
}

/// The bytes that `coded` encodes, or `None` if it is not a valid Huffman string: EOS inside
/// it, or padding longer than 7 bits or not of ones (RFC 7541, 5.2).
pub(super) fn decode(coded: &[u8]) -> Option<Vec<u8>> {
    let table = canonical();
    let mut decoded = Vec::with_capacity(coded.len() * 8 / 5);
    let (mut code, mut length) = (0u32, 0usize);
    for byte in coded {
        for bit in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> bit) & 1);
            length += 1;
            if length > 30 {
                return None;
            }
            let Some(index) = code.checked_sub(table.first[length]) else {
                continue;
            };
            if index < table.count[length] {
                let symbol = table.symbols[table.offset[length] + index as usize];
                decoded.push(u8::try_from(symbol).ok()?);
                (code, length) = (0, 0);
            }
        }
    }
    (length <= 7 && code == (1 << length) - 1).then_some(decoded)
}

#[cfg(test)]
mod tests {
    use super::{LENGTHS, decode};

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn the_code_is_complete() {
        // Kraft's sum of a complete prefix code is exactly 1: no length is off by one.
        let sum: u64 = LENGTHS.iter().map(|&length| 1u64 << (30 - length)).sum();
        assert_eq!(sum, 1 << 30);
    }

    #[test]
    fn the_rfcs_examples_decode() {
        // RFC 7541, C.4 and C.6.
        for (coded, text) in [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
                "https://www.example.com",
            ),
            (
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 \
                 3160 65c0 03ed 4ee5 b106 3d50 07",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ] {
            assert_eq!(
                decode(&hex(coded)).as_deref(),
                Some(text.as_bytes()),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_padding_is_refused() {
        // "private" (39 bits) with its one bit of padding cleared; "302" (16 bits) with a whole
        // byte of padding.
        assert_eq!(decode(&hex("aec3 771a 4a")), None);
        assert_eq!(decode(&hex("6402 ff")), None);
    }
}
