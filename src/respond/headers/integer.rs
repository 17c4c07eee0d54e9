//! Integers as header values, written with no allocation when small and one when large.
//!
//! `HeaderValue::from(u64)` formats into a buffer of 20 bytes and freezes it: two allocations
//! (the buffer, and the shared record `bytes` makes for a buffer not filled to its capacity) and
//! two frees, for a value that is most often one to three digits. Every admitted response carries
//! at least one integer header, so they are served from a static table below [`TABLE_SIZE`], and
//! written into a buffer of their exact length above it.

use bytes::Bytes;
use http::HeaderValue;

/// How many integers, from 0, the static table holds: the counts a client is told (requests used,
/// seconds to wait, a limit's capacity) are most often below it.
const TABLE_SIZE: usize = 1_000;

/// The width of a slot in [`DIGITS`]: every integer of the table fits in it.
const SLOT: usize = 3;

/// The decimal digits of every integer below [`TABLE_SIZE`], each in a slot of [`SLOT`] bytes,
/// left-aligned (the rest of a slot is unused).
static DIGITS: [u8; TABLE_SIZE * SLOT] = digits();

const fn digits() -> [u8; TABLE_SIZE * SLOT] {
    let mut table = [b' '; TABLE_SIZE * SLOT];
    let mut n = 0;
    while n < TABLE_SIZE {
        let slot = n * SLOT;
        let len = decimal_len(n as u64);
        let mut rest = n;
        let mut digit = len;
        while digit > 0 {
            digit -= 1;
            table[slot + digit] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        n += 1;
    }
    table
}

/// How many decimal digits `n` has.
const fn decimal_len(n: u64) -> usize {
    let mut len = 1;
    let mut rest = n / 10;
    while rest > 0 {
        len += 1;
        rest /= 10;
    }
    len
}

/// `n` as a header value, the same bytes as `HeaderValue::from(n)`.
pub(crate) fn integer(n: u64) -> HeaderValue {
    let value = match usize::try_from(n) {
        Ok(small) if small < TABLE_SIZE => {
            let slot = small * SLOT;
            // Static bytes: the value points into the table, so cloning and dropping it are free.
            Bytes::from_static(&DIGITS[slot..slot + decimal_len(n)])
        }
        _ => Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes()),
    };
    // Digits are always a valid header value.
    HeaderValue::from_maybe_shared(value).unwrap_or(HeaderValue::from_static("0"))
}

/// The largest integer a structured field may hold (15 digits): larger counts are capped to it.
pub(crate) const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

#[cfg(test)]
mod tests {
    use super::*;

    /// Integers around every change in the number of digits, the table's end and the extremes.
    fn edges() -> impl Iterator<Item = u64> {
        let powers = (0..20).map(|exponent| 10u64.pow(exponent));
        let around = powers.flat_map(|power| [power - 1, power, power + 1]);
        let table = (0..TABLE_SIZE as u64 + 2).chain([u64::MAX - 1, u64::MAX]);
        around.chain(table)
    }

    #[test]
    fn integers_are_written_as_to_string_writes_them() {
        let mut random = fastrand::Rng::with_seed(7);
        let random = (0..10_000).map(|_| random.u64(..) >> random.u32(0..64));
        for n in edges().chain(random) {
            let value = integer(n);
            assert_eq!(value, n.to_string().as_str(), "{n}");
            assert_eq!(value, HeaderValue::from(n), "{n}");
        }
    }
}
