//! `X-Request-Id`: passed on as the client (or a proxy in front) sent it, or made here, so that
//! the upstream's log, the access log and the client's answer name a request alike.

use http::{HeaderMap, HeaderName, HeaderValue};

/// The header's name.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest request id passed on as it came; a longer one is replaced.
const MAX_LENGTH: usize = 200;

/// The request's id: its `X-Request-Id` if it has a usable one (visible ASCII, at most 200
/// bytes), else a new one (32 hexadecimal digits, random), set in `headers`.
pub fn request_id(headers: &mut HeaderMap) -> HeaderValue {
    if let Some(id) = headers.get(X_REQUEST_ID)
        && !id.is_empty()
        && id.len() <= MAX_LENGTH
        && id.as_bytes().iter().all(|byte| byte.is_ascii_graphic())
    {
        return id.clone();
    }
    let id = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let id = HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("-"));
    headers.insert(X_REQUEST_ID, id.clone());
    id
}
