//! Formatting header values: whole seconds rounded up, structured fields.
//!
//! Times are always rounded up: a client that waits as long as it is told, or until the instant it
//! is given, gets in.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};
use sfv::StringRef;

use super::integer::{SF_INTEGER_MAX, integer};

/// Sets a single-valued header unless a custom rejection or an inner layer already did.
pub(crate) fn fill(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    headers.entry(name).or_insert(value);
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after(headers: &mut HeaderMap, after: Duration) {
    fill(headers, RETRY_AFTER, integer(retry_seconds(after)));
}

/// A wait as `Retry-After` states it: whole seconds, rounded up, at least 1.
pub(crate) fn retry_seconds(after: Duration) -> u64 {
    whole_seconds(after).as_secs().max(1)
}

/// Structured-field integers have at most 15 digits.
pub(crate) fn sf_integer(value: u64) -> sfv::Integer {
    sfv::integer(value.min(SF_INTEGER_MAX) as i64)
}

/// A limit or rule name as a structured-field string.
pub(crate) fn sf_name(name: &str) -> &StringRef {
    // Names are validated to a subset of sf-string characters when a layer is built.
    StringRef::from_str(name).unwrap_or(StringRef::constant("invalid"))
}

pub(crate) fn header_value(text: String) -> HeaderValue {
    // sfv only emits visible ASCII and spaces.
    HeaderValue::try_from(text).unwrap_or(HeaderValue::from_static(""))
}

/// A duration rounded up to whole seconds.
pub(crate) fn whole_seconds(duration: Duration) -> Duration {
    let seconds = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    Duration::from_secs(seconds)
}

/// Whole seconds since the Unix epoch, rounded up: the first whole second at or after `time`.
pub(crate) fn epoch_seconds(time: SystemTime) -> u64 {
    whole_seconds(time.duration_since(UNIX_EPOCH).unwrap_or_default()).as_secs()
}
