//! Parsing the hops of `X-Forwarded-For` and RFC 7239 `Forwarded` headers.
//!
//! Every header line is read, in order, as one list (RFC 9110 §5.3). Each hop is either an
//! address or unusable (`unknown`, an obfuscated identifier, garbage); the caller decides how far
//! from the right it may trust them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::HeaderValue;
use smallvec::SmallVec;

/// One hop of a forwarding chain: an address, or `None` when the entry names no usable address.
pub(super) type Hop = Option<IpAddr>;

/// Hops, left (closest to the client) to right (closest to us).
pub(super) type Hops = SmallVec<[Hop; 8]>;

/// The hops of `X-Forwarded-For`: comma-separated addresses, optionally with a port
/// (`203.0.113.7:4711`, `[2001:db8::1]:4711`) as some proxies write them.
pub(super) fn x_forwarded_for<'a>(lines: impl Iterator<Item = &'a HeaderValue>) -> Hops {
    hops(lines, |line, hops| {
        hops.extend(line.split(',').map(|entry| parse_address(entry.trim())));
    })
}

/// The hops of `Forwarded`: one per forwarded-element, the address of its `for` parameter.
/// An element without `for` is an unusable hop: skipping it would hand the decision to whatever
/// the client wrote further left. So is an obfuscated or `unknown` node: it names no address.
pub(super) fn forwarded<'a>(lines: impl Iterator<Item = &'a HeaderValue>) -> Hops {
    hops(lines, |line, hops| {
        for element in split_unquoted(line, ',') {
            let for_value = split_unquoted(element, ';').find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| value.trim())
            });
            hops.push(for_value.and_then(|value| parse_node(unquote(value))));
        }
    })
}

/// The hops of every header line in order, as one list: `parse` adds a line's own; a line that is
/// not visible ASCII is one unusable hop.
fn hops<'a>(
    lines: impl Iterator<Item = &'a HeaderValue>,
    mut parse: impl FnMut(&str, &mut Hops),
) -> Hops {
    let mut hops = Hops::new();
    for line in lines {
        match line.to_str() {
            Ok(line) => parse(line, &mut hops),
            Err(_) => hops.push(None),
        }
    }
    hops
}

/// The address of an RFC 7239 node (`192.0.2.43`, `"[2001:db8::1]:4711"`), also when only its
/// port is obfuscated (`"192.0.2.43:_p1"`, `"[2001:db8::1]:_x"`): the port plays no part in the
/// key. An obfuscated or `unknown` node name has no address.
fn parse_node(node: &str) -> Option<IpAddr> {
    match node.rsplit_once(':') {
        // An IPv6 address needs its brackets here: in `::1:_x` the colons are ambiguous.
        Some((name, port)) if is_obfuscated_port(port) => match name.strip_prefix('[') {
            Some(v6) => v6
                .strip_suffix(']')?
                .parse::<Ipv6Addr>()
                .ok()
                .map(IpAddr::V6),
            None => name.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
        },
        _ => parse_address(node),
    }
}

/// RFC 7239 §6.3: `obfport = "_" 1*(ALPHA / DIGIT / "." / "_" / "-")`.
fn is_obfuscated_port(port: &str) -> bool {
    port.strip_prefix('_').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

/// An address, with or without a port; IPv6 may be bracketed.
fn parse_address(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = entry.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    entry
        .strip_prefix('[')?
        .strip_suffix(']')?
        .parse::<IpAddr>()
        .ok()
}

/// Removes the quotes of an RFC 9110 quoted-string (addresses never contain escapes).
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// Splits on `separator` outside double quotes.
fn split_unquoted(text: &str, separator: char) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        let mut quoted = false;
        let mut escaped = false;
        for (index, c) in text.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                c if c == separator && !quoted => {
                    rest = Some(&text[index + c.len_utf8()..]);
                    return Some(&text[..index]);
                }
                _ => {}
            }
        }
        rest = None;
        Some(text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Hop {
        Some(text.parse().unwrap())
    }

    fn values(lines: &[&str]) -> Vec<HeaderValue> {
        lines
            .iter()
            .map(|line| HeaderValue::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn x_forwarded_for_reads_every_line_in_order() {
        let lines = values(&[
            "1.1.1.1, 2.2.2.2",
            "[2001:db8::1]:80,3.3.3.3:4711",
            "garbage",
        ]);
        let hops = x_forwarded_for(lines.iter());
        assert_eq!(
            hops.as_slice(),
            [
                ip("1.1.1.1"),
                ip("2.2.2.2"),
                ip("2001:db8::1"),
                ip("3.3.3.3"),
                None
            ]
        );
    }

    #[test]
    fn x_forwarded_for_keeps_empty_entries_as_unusable() {
        let lines = values(&["1.1.1.1,,2.2.2.2"]);
        assert_eq!(
            x_forwarded_for(lines.iter()).as_slice(),
            [ip("1.1.1.1"), None, ip("2.2.2.2")]
        );
    }

    #[test]
    fn forwarded_reads_the_for_parameter_of_each_element() {
        let lines = values(&[
            r#"for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711""#,
            r#"proto=https;host="a,b", for=unknown, for=_hidden, for="198.51.100.17:80""#,
        ]);
        let hops = forwarded(lines.iter());
        assert_eq!(
            hops.as_slice(),
            [
                ip("192.0.2.60"),
                ip("2001:db8:cafe::17"),
                None,
                None,
                None,
                ip("198.51.100.17")
            ]
        );
    }

    #[test]
    fn forwarded_accepts_obfuscated_ports_but_not_obfuscated_nodes() {
        let lines = values(&[
            r#"for="192.0.2.43:_p1", for="[2001:db8::1]:_x", for="[::ffff:192.0.2.9]:_a.b-c_9""#,
            r#"for=_hidden, for=unknown, for="_hidden:_p1", for="unknown:_p1""#,
            // Not obfuscated ports: empty, a character outside the set, an unbracketed IPv6.
            r#"for="192.0.2.43:_", for="192.0.2.43:_p!", for="2001:db8::1:_x""#,
        ]);
        assert_eq!(
            forwarded(lines.iter()).as_slice(),
            [
                ip("192.0.2.43"),
                ip("2001:db8::1"),
                ip("::ffff:192.0.2.9"),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ]
        );
    }

    #[test]
    fn quoted_separators_do_not_split() {
        let parts: Vec<_> = split_unquoted(r#"a="x,y",b"#, ',').collect();
        assert_eq!(parts, [r#"a="x,y""#, "b"]);
    }
}
