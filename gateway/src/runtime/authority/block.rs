//! One HPACK header block (RFC 7541) read field by field, and its `:authority` replaced when
//! `http::uri::Authority` would refuse it.
//!
//! The replacement has the same length as the value it replaces, and the same representation
//! (indexed or not, by the same name): an entry the dynamic table adds is then the same size on
//! both sides, so h2's table evicts what the client's does, and every index the client sends
//! later still names the entry it means (whose value is the replacement: a later request that
//! refers to it is answered too). Nothing else in the block changes; the dynamic table itself
//! is not followed, so a `:authority` named by an index of the dynamic table (which an encoder
//! has no reason to send, the name being in the static table) is left as it is.

use std::borrow::Cow;

use super::huffman;

/// The static table's index of `:authority`.
const AUTHORITY: usize = 1;

/// `block` with each `:authority` that `http` refuses replaced, or `None` when there is none
/// (or the block is not valid HPACK: h2 then judges it as sent).
pub(super) fn rewrite(block: &[u8]) -> Option<Vec<u8>> {
    let mut rewritten: Option<Vec<u8>> = None;
    let (mut at, mut copied) = (0, 0);
    while let Some(&first) = block.get(at) {
        if first & 0x80 != 0 {
            // An indexed field: nothing literal to read.
            at = integer(block, at, 7)?.1;
            continue;
        }
        if first & 0xe0 == 0x20 {
            // A dynamic table size update.
            at = integer(block, at, 5)?.1;
            continue;
        }
        // A literal: with incremental indexing (01), without indexing (0000) or never indexed
        // (0001); its name an index, or a string when the index is 0.
        let prefix = if first & 0xc0 == 0x40 { 6 } else { 4 };
        let (index, next) = integer(block, at, prefix)?;
        at = next;
        let authority = if index == 0 {
            let (name, next) = string(block, at)?;
            at = next;
            name.decoded()?.as_ref() == b":authority"
        } else {
            index == AUTHORITY
        };
        let value_at = at;
        let (value, next) = string(block, at)?;
        at = next;
        if !authority {
            continue;
        }
        let value = value.decoded()?;
        if value.is_empty() || http::uri::Authority::try_from(value.as_ref()).is_ok() {
            continue;
        }
        let out = rewritten.get_or_insert_with(|| Vec::with_capacity(block.len() + 8));
        out.extend_from_slice(&block[copied..value_at]);
        // A plain string (no Huffman coding) of the value's length.
        put_integer(out, 0x00, 7, value.len());
        out.extend(value.iter().map(|&byte| replacement(byte)));
        copied = at;
    }
    let mut out = rewritten?;
    out.extend_from_slice(&block[copied..]);
    Some(out)
}

/// What a byte of a refused authority becomes: letters, digits, `.` and `-` stay, the rest is
/// `_`. What remains is a host name `http` accepts (`tmp%2Fserve.sock` is `tmp_2Fserve.sock`),
/// and one that a log still recognises.
fn replacement(byte: u8) -> u8 {
    if byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-' {
        byte
    } else {
        b'_'
    }
}

/// A string literal of a header block: its bytes as sent, and whether they are Huffman coded.
struct Literal<'a> {
    bytes: &'a [u8],
    huffman: bool,
}

impl Literal<'_> {
    fn decoded(&self) -> Option<Cow<'_, [u8]>> {
        if self.huffman {
            huffman::decode(self.bytes).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(self.bytes))
        }
    }
}

/// The string literal at `at` (RFC 7541, 5.2), and where the block goes on.
fn string(block: &[u8], at: usize) -> Option<(Literal<'_>, usize)> {
    let huffman = block.get(at)? & 0x80 != 0;
    let (length, start) = integer(block, at, 7)?;
    let end = start.checked_add(length)?;
    let bytes = block.get(start..end)?;
    Some((Literal { bytes, huffman }, end))
}

/// The integer at `at` with a `prefix`-bit prefix (RFC 7541, 5.1), and where the block goes
/// on. At most four bytes follow the prefix: more is no length a block can hold.
fn integer(block: &[u8], at: usize, prefix: u32) -> Option<(usize, usize)> {
    let mask = (1u8 << prefix) - 1;
    let mut value = usize::from(block.get(at)? & mask);
    let mut at = at + 1;
    if value < usize::from(mask) {
        return Some((value, at));
    }
    for shift in [0, 7, 14, 21] {
        let byte = *block.get(at)?;
        at += 1;
        value += usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((value, at));
        }
    }
    None
}

/// Writes `value` with a `prefix`-bit prefix after the bits `high`.
fn put_integer(out: &mut Vec<u8>, high: u8, prefix: u32, mut value: usize) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(high | value as u8);
        return;
    }
    out.push(high | mask as u8);
    value -= mask;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::{integer, put_integer, rewrite};

    /// `:method POST`, `:authority` as given (a literal indexed by the static table's name, of
    /// `representation`), `:path /`.
    fn block(representation: u8, value: &[u8]) -> Vec<u8> {
        let mut block = vec![0x83, representation];
        put_integer(&mut block, 0x00, 7, value.len());
        block.extend_from_slice(value);
        block.push(0x84);
        block
    }

    #[test]
    fn an_authority_http_refuses_is_replaced_by_one_of_its_length() {
        for representation in [0x41, 0x01, 0x11] {
            let sent = block(representation, b"tmp%2Fserve.sock");
            assert_eq!(
                rewrite(&sent),
                Some(block(representation, b"tmp_2Fserve.sock"))
            );
        }
        assert_eq!(rewrite(&block(0x41, b"a b")), Some(block(0x41, b"a_b")));
        assert_eq!(
            rewrite(&block(0x41, b"unix:%2Ftmp")),
            Some(block(0x41, b"unix__2Ftmp"))
        );
    }

    #[test]
    fn a_valid_authority_and_other_fields_are_left_alone() {
        for value in [&b"localhost"[..], b"127.0.0.1:8081", b"[::1]:80", b"a.b-c"] {
            assert_eq!(rewrite(&block(0x41, value)), None);
        }
        // `:path` (index 4) with a value `http` would refuse as an authority.
        assert_eq!(rewrite(&[0x44, 0x03, b'/', b' ', b'x']), None);
        // Not HPACK: a string longer than the block.
        assert_eq!(rewrite(&[0x41, 0x09, b'a']), None);
    }

    #[test]
    fn a_huffman_coded_or_new_named_authority_is_read() {
        // "no-cache" Huffman coded (RFC 7541, C.4.2) is a valid host: left alone.
        let coded = [0x41, 0x86, 0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf];
        assert_eq!(rewrite(&coded), None);
        // `%` alone, Huffman coded (010101, then two bits of padding), replaced by a plain `_`.
        assert_eq!(rewrite(&[0x41, 0x81, 0x57]), Some(vec![0x41, 0x01, b'_']));
        // The name as a string.
        let mut named = vec![0x40, 0x0a];
        named.extend_from_slice(b":authority");
        named.extend_from_slice(&[0x03, b'a', b' ', b'b']);
        let mut expected = named.clone();
        expected[14] = b'_';
        assert_eq!(rewrite(&named), Some(expected));
    }

    #[test]
    fn integers_are_read_as_written() {
        for value in [0, 14, 15, 16, 127, 128, 300, 16_384, 2_000_000] {
            let mut out = Vec::new();
            put_integer(&mut out, 0x00, 4, value);
            assert_eq!(integer(&out, 0, 4), Some((value, out.len())), "{value}");
        }
        // RFC 7541, C.1.2: 1337 with a 5-bit prefix.
        assert_eq!(integer(&[0x1f, 0x9a, 0x0a], 0, 5), Some((1337, 3)));
    }
}
