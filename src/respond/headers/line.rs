//! [`LinePrefix`]: a rule's `RateLimit` line, `"name";r=<remaining>;t=<seconds until reset>`,
//! from its start serialized once per layer and two integers per response.
//!
//! Serializing the whole line with `sfv` on every response (the name validated and quoted, each
//! integer through `Display`, a `String` grown three times) cost about 2,000 instructions; only
//! the two integers change from one response to the next. And often not even they: a key seen for
//! the first time in a while is told the rule's full capacity less one, a key being refused is
//! told 0, each with the same wait, so each thread keeps the last line it made and hands out that
//! one again (a shared buffer's clone) while the rule and both numbers are the same.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::HeaderValue;
use sfv::ListSerializer;

use super::format::sf_name;
use super::integer::SF_INTEGER_MAX;

/// The start of a rule's `RateLimit` line, `"name";r=`: its name as `sfv` serializes a bare item,
/// then the first parameter's key.
#[derive(Debug)]
pub(crate) struct LinePrefix {
    /// Unique among every prefix made in the process, so that a thread's last line is never taken
    /// for another rule's (an address could be reused once a layer is dropped).
    id: u64,
    bytes: Box<[u8]>,
}

/// The next [`LinePrefix::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The longest line: the prefix of a name of 64 characters (validated when a policy is built:
/// `A-Z a-z 0-9 . _ -`, which need no escape), `"` and `";r=`, two integers of 15 digits, `;t=`.
const LONGEST: usize = 64 + 5 + 15 + 3 + 15;

/// The line a thread made last, and what it said.
struct Last {
    id: u64,
    remaining: u64,
    reset_seconds: u64,
    value: HeaderValue,
}

thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

impl LinePrefix {
    /// The prefix of the rule `name`.
    pub(crate) fn new(name: &str) -> Self {
        let mut list = ListSerializer::new();
        list.bare_item(sf_name(name));
        let mut prefix = list.finish().unwrap_or_default().into_bytes();
        prefix.extend_from_slice(b";r=");
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            bytes: prefix.into(),
        }
    }

    /// The rule's line: `remaining` requests, reset in `reset_seconds`, each capped to the 15
    /// digits of a structured-field integer.
    pub(crate) fn line(&self, remaining: u64, reset_seconds: u64) -> HeaderValue {
        let (remaining, reset_seconds) = (
            remaining.min(SF_INTEGER_MAX),
            reset_seconds.min(SF_INTEGER_MAX),
        );
        LAST.with(|last| {
            let mut last = last.borrow_mut();
            match &*last {
                Some(line)
                    if line.id == self.id
                        && line.remaining == remaining
                        && line.reset_seconds == reset_seconds =>
                {
                    line.value.clone()
                }
                _ => {
                    let value = self.write(remaining, reset_seconds);
                    *last = Some(Last {
                        id: self.id,
                        remaining,
                        reset_seconds,
                        value: value.clone(),
                    });
                    value
                }
            }
        })
    }

    fn write(&self, remaining: u64, reset_seconds: u64) -> HeaderValue {
        let (mut remaining_digits, mut reset_digits) = (itoa::Buffer::new(), itoa::Buffer::new());
        let parts = [
            &self.bytes[..],
            remaining_digits.format(remaining).as_bytes(),
            b";t=",
            reset_digits.format(reset_seconds).as_bytes(),
        ];
        let len = parts.iter().map(|part| part.len()).sum();
        // The prefix is what sfv wrote and the rest digits: always a valid value.
        let valid =
            |bytes| HeaderValue::from_maybe_shared(bytes).unwrap_or(HeaderValue::from_static(""));
        if len > LONGEST {
            // No validated rule has so long a name.
            return valid(Bytes::from(parts.concat()));
        }
        let mut line = Line {
            len,
            bytes: [0; LONGEST],
        };
        let mut at = 0;
        for part in parts {
            line.bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        // One allocation holds the bytes and their reference count, so the line kept by the
        // thread and the one handed out share it.
        valid(Bytes::from_owner(line))
    }
}

/// A line's bytes, in place.
struct Line {
    len: usize,
    bytes: [u8; LONGEST],
}

impl AsRef<[u8]> for Line {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use sfv::KeyRef;

    use super::*;
    use crate::respond::headers::format::sf_integer;

    /// The line as `sfv` writes it whole.
    fn serialized(name: &str, remaining: u64, reset_seconds: u64) -> String {
        let mut list = ListSerializer::new();
        list.bare_item(sf_name(name))
            .parameter(KeyRef::constant("r"), sf_integer(remaining))
            .parameter(KeyRef::constant("t"), sf_integer(reset_seconds));
        list.finish().unwrap()
    }

    #[test]
    fn a_line_is_what_sfv_serializes() {
        // The longest name a rule may have, and a longer one no rule has.
        let (long, longer) = ("a".repeat(64), "b".repeat(100));
        let names = ["api", "per-10s", "a.b_c-D9", "0", &long, &longer];
        let edges = (0..20)
            .map(|exponent| 10u64.pow(exponent))
            .flat_map(|power| [power - 1, power])
            .chain([SF_INTEGER_MAX, SF_INTEGER_MAX + 1, u64::MAX]);
        let edges: Vec<u64> = edges.collect();
        let mut random = fastrand::Rng::with_seed(9);
        for name in names {
            let prefix = LinePrefix::new(name);
            let pairs = edges
                .iter()
                .flat_map(|&r| edges.iter().map(move |&t| (r, t)));
            let random = (0..2_000).map(|_| {
                let mut draw = || random.u64(..) >> random.u32(0..64);
                (draw(), draw())
            });
            for (remaining, reset) in pairs.chain(random.collect::<Vec<_>>()) {
                let line = prefix.line(remaining, reset);
                let expected = serialized(name, remaining, reset);
                assert_eq!(line, expected.as_str(), "{name} {remaining} {reset}");
            }
        }
    }

    #[test]
    fn a_thread_hands_out_its_last_line_only_for_the_same_rule_and_numbers() {
        let (first, second) = (LinePrefix::new("a"), LinePrefix::new("b"));
        assert_eq!(first.line(5, 1), r#""a";r=5;t=1"#);
        assert_eq!(first.line(5, 1), r#""a";r=5;t=1"#);
        assert_eq!(second.line(5, 1), r#""b";r=5;t=1"#);
        assert_eq!(second.line(4, 1), r#""b";r=4;t=1"#);
        assert_eq!(second.line(4, 2), r#""b";r=4;t=2"#);
        // Another rule of the same name is another prefix, with a line of its own.
        let again = LinePrefix::new("b");
        assert_eq!(again.line(4, 2), r#""b";r=4;t=2"#);
        assert_ne!(again.id, second.id);
    }
}
