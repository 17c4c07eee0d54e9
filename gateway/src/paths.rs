//! Request paths as routes match them: normalised the way nginx matches locations, so that
//! `/%61pi/x`, `//api/x`, `/./api/x` and `/static/../api/x` are all `/api/x`, the path an
//! upstream that decodes or normalises paths serves them as. What cannot be normalised without
//! guessing how the upstream reads it is refused ([`AmbiguousPath`]).

use std::borrow::Cow;

/// A path that the gateway refuses (400) rather than guess how the upstream reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AmbiguousPath {
    /// `%2F`: a `/` inside a segment for some servers, a separator for others.
    #[error("the path holds an encoded `/` (%2F), which servers read differently")]
    EncodedSlash,
    /// `%5C`: a `\`, which some servers read as a `/`.
    #[error("the path holds an encoded `\\` (%5C), which some servers read as `/`")]
    EncodedBackslash,
    /// `%00`: a NUL, which ends the path for some servers.
    #[error("the path holds an encoded NUL (%00)")]
    EncodedNul,
    /// A `%` not followed by two hexadecimal digits.
    #[error("the path holds a `%` that is not followed by two hexadecimal digits")]
    BadPercent,
}

/// `path` (without its query) normalised: percent-encoded unreserved characters decoded (RFC
/// 3986, 6.2.2.2) and other escapes in upper case, repeated slashes merged, and `.` and `..`
/// segments removed (RFC 3986, 5.2.4; `..` never climbs above the root). A path already normal,
/// as nearly all are, is returned as it is, without copying.
pub fn normalise(path: &str) -> Result<Cow<'_, str>, AmbiguousPath> {
    if is_normal(path.as_bytes()) {
        return Ok(Cow::Borrowed(path));
    }
    let decoded = decode_unreserved(path)?;
    Ok(Cow::Owned(remove_dot_segments(&decoded)))
}

/// No `%`, no empty segment and no `.` or `..` segment: nothing to do.
fn is_normal(path: &[u8]) -> bool {
    if path.first() != Some(&b'/') {
        return false;
    }
    let mut at = 0;
    while at < path.len() {
        match path[at] {
            b'%' => return false,
            b'/' => {
                let segment = &path[at + 1..];
                let end = segment
                    .iter()
                    .position(|&byte| byte == b'/')
                    .unwrap_or(segment.len());
                let segment = &segment[..end];
                // An empty segment is only normal at the very end (a trailing slash).
                if (segment.is_empty() && at + 1 < path.len())
                    || segment == b"."
                    || segment == b".."
                {
                    return false;
                }
            }
            _ => {}
        }
        at += 1;
    }
    true
}

fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn decode_unreserved(path: &str) -> Result<String, AmbiguousPath> {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len() + 1);
    if bytes.first() != Some(&b'/') {
        out.push('/');
    }
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            // The path is ASCII (`http::Uri` admits nothing else), so byte by byte is safe.
            out.push(char::from(bytes[at]));
            at += 1;
            continue;
        }
        let (Some(high), Some(low)) = (
            bytes.get(at + 1).copied().and_then(hex),
            bytes.get(at + 2).copied().and_then(hex),
        ) else {
            return Err(AmbiguousPath::BadPercent);
        };
        let byte = high << 4 | low;
        match byte {
            b'/' => return Err(AmbiguousPath::EncodedSlash),
            b'\\' => return Err(AmbiguousPath::EncodedBackslash),
            0 => return Err(AmbiguousPath::EncodedNul),
            byte if is_unreserved(byte) => out.push(char::from(byte)),
            byte => {
                const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                out.push(char::from(DIGITS[usize::from(byte >> 4)]));
                out.push(char::from(DIGITS[usize::from(byte & 0xF)]));
            }
        }
        at += 3;
    }
    Ok(out)
}

/// `path` (starting with `/`) without empty, `.` and `..` segments; it keeps a trailing slash,
/// and ends with one where its last segment was `.` or `..` (`/a/b/..` is `/a/`).
fn remove_dot_segments(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let mut trailing_slash = false;
    for segment in path.split('/').skip(1) {
        trailing_slash = matches!(segment, "" | "." | "..");
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            segment => segments.push(segment),
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in &segments {
        out.push('/');
        out.push_str(segment);
    }
    if trailing_slash || segments.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(path: &str) -> String {
        normalise(path).unwrap().into_owned()
    }

    #[test]
    fn the_variants_of_a_path_are_one_path() {
        for variant in [
            "/api/x",
            "/%61pi/x",
            "/%61%70%69/x",
            "//api/x",
            "/api//x",
            "///api///x",
            "/./api/x",
            "/api/./x",
            "/static/../api/x",
            "/%2e/api/x",
            "/static/%2E%2E/api/x",
            "/../api/x",
            "/a/b/../../api/x",
        ] {
            assert_eq!(normal(variant), "/api/x", "{variant}");
        }
    }

    #[test]
    fn normal_paths_are_borrowed() {
        for path in [
            "/",
            "/api/x",
            "/api/",
            "/.well-known/x",
            "/a..b/c.d",
            "/x/..y",
        ] {
            assert!(
                matches!(normalise(path), Ok(Cow::Borrowed(p)) if p == path),
                "{path}"
            );
        }
    }

    #[test]
    fn trailing_slashes_and_the_root() {
        assert_eq!(normal("/api/x/"), "/api/x/");
        assert_eq!(normal("/api/x//"), "/api/x/");
        assert_eq!(normal("/api/x/."), "/api/x/");
        assert_eq!(normal("/api/x/.."), "/api/");
        assert_eq!(normal("/.."), "/");
        assert_eq!(normal("//"), "/");
        assert_eq!(normal(""), "/");
    }

    #[test]
    fn other_escapes_stay_escaped_in_upper_case() {
        assert_eq!(normal("/a%20b/%c3%a9"), "/a%20b/%C3%A9");
        // A decoded `%25` would start a new escape: it stays encoded.
        assert_eq!(normal("/%2561pi"), "/%2561pi");
        assert_eq!(normal("/a%3fb"), "/a%3Fb");
    }

    #[test]
    fn ambiguous_paths_are_refused() {
        assert_eq!(normalise("/api%2Fx"), Err(AmbiguousPath::EncodedSlash));
        assert_eq!(normalise("/api%2fx"), Err(AmbiguousPath::EncodedSlash));
        assert_eq!(normalise("/api%5cx"), Err(AmbiguousPath::EncodedBackslash));
        assert_eq!(normalise("/api%00"), Err(AmbiguousPath::EncodedNul));
        assert_eq!(normalise("/api%zz"), Err(AmbiguousPath::BadPercent));
        assert_eq!(normalise("/api%4"), Err(AmbiguousPath::BadPercent));
        assert_eq!(normalise("/api%"), Err(AmbiguousPath::BadPercent));
    }
}
