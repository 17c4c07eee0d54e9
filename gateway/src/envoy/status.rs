//! What Envoy is answered: each descriptor's status, the overall code, the headers to add, and
//! the answer while the store fails.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use http::HeaderMap;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::decision::RuleVerdict;
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::store::StoreError;

use super::limit::{LimitKind, Reported};
use super::matching::Found;
use crate::config::EnvoySettings;

/// Envoy's questions answered by `failure_mode`: the reference's counter, which the alert
/// `RatelimitEnvoyErrors` (gateway/prometheus/alerts.yml) reads.
fn failures() -> metrics::Counter {
    metrics::counter!("ratelimit_service_should_rate_limit_error", "err_type" => "redis_error")
}

/// Exports [`failures`] before the first failure, so that a dashboard or an alert tells "none
/// yet" from "not exported". Adds 0: a reload that calls it again never sets a count back.
pub(super) fn export_failures() {
    failures().increment(0);
}

/// A store that failed: every counted descriptor OK (`Open`) or OVER_LIMIT (`Closed`, with
/// `Retry-After: 1`).
pub(super) fn failed(
    settings: &EnvoySettings,
    found: &[Option<Found>],
    mut statuses: Vec<DescriptorStatus>,
    err: &StoreError,
) -> RateLimitResponse {
    tracing::warn!(error = %err, failure_mode = if matches!(settings.failure_mode, FailureMode::Closed) { "closed" } else { "open" }, "the store failed");
    failures().increment(1);
    let closed = matches!(settings.failure_mode, FailureMode::Closed);
    for (status, found) in statuses.iter_mut().zip(found) {
        if let Some(LimitKind::Counted { .. }) = found.as_ref().map(|found| &found.limit.kind) {
            status.code = if closed { Code::OverLimit } else { Code::Ok }.into();
        }
    }
    let headers = if closed {
        vec![header("retry-after", "1")]
    } else if settings.headers.contains(HeaderFamilies::RATE_LIMITING) {
        vec![header("rate-limiting-state", "Skipped")]
    } else {
        Vec::new()
    };
    response(statuses, closed, headers)
}

/// A counted descriptor's status, from its rule's own verdict (`own`) and whether its limit
/// refused the request.
pub(super) fn fill(
    status: &mut DescriptorStatus,
    found: &Option<Found>,
    reported: Reported,
    own: &RuleVerdict,
    denied: bool,
) {
    let Some(found) = found else { return };
    status.code = if denied { Code::OverLimit } else { Code::Ok }.into();
    status.current_limit = Some(current_limit(found, reported));
    // What remains, refused or not: a refusal counted nothing, so a request of 5 refused by a
    // fresh limit of 3 leaves 3, as the `RateLimit` header of the same answer says (`r=3`).
    // The reference says 0, having counted the refused hits.
    status.limit_remaining = u32::try_from(own.remaining()).unwrap_or(u32::MAX);
    status.duration_until_reset = Some(proto(own.full_after()));
}

/// The limit as `current_limit` tells it.
pub(super) fn current_limit(found: &Found, reported: Reported) -> RateLimit {
    RateLimit {
        name: found.limit.name.clone().unwrap_or_default(),
        requests_per_unit: reported.requests_per_unit,
        unit: reported.unit.into(),
    }
}

/// The answer: the statuses, `OVER_LIMIT` when `refused`, and the headers to add.
pub(super) fn response(
    statuses: Vec<DescriptorStatus>,
    refused: bool,
    response_headers_to_add: Vec<HeaderValue>,
) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: if refused { Code::OverLimit } else { Code::Ok }.into(),
        statuses,
        response_headers_to_add,
        ..RateLimitResponse::default()
    }
}

/// `headers` as Envoy takes them.
pub(super) fn header_values(headers: &HeaderMap) -> Vec<HeaderValue> {
    headers
        .iter()
        .filter_map(|(name, value)| Some(header(name.as_str(), value.to_str().ok()?)))
        .collect()
}

fn header(key: &str, value: &str) -> HeaderValue {
    HeaderValue {
        key: key.to_owned(),
        value: value.to_owned(),
        ..HeaderValue::default()
    }
}

pub(super) fn proto(duration: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}
