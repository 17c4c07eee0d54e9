//! The in-process baseline the benchmarks compare with: tower_governor, keyed as ours.

use http::{HeaderValue, Request};
use tower_governor::GovernorError;
use tower_governor::key_extractor::KeyExtractor;

/// tower_governor's key: the `x-key` header, as `HeaderKey::new("x-key")` reads it for ours
/// (both refuse a request without it; ours also trims whitespace, which the benchmarks never
/// send).
#[derive(Clone, Copy, Debug)]
pub struct XKey;

impl KeyExtractor for XKey {
    type Key = HeaderValue;

    fn extract<T>(&self, request: &Request<T>) -> Result<HeaderValue, GovernorError> {
        request
            .headers()
            .get("x-key")
            .cloned()
            .ok_or(GovernorError::UnableToExtractKey)
    }
}
