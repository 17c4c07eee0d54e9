//! The quota service's metrics, on the admin address's `/metrics` beside the rate limit
//! service's (their descriptions are in `runtime::prometheus` with the others): streams open,
//! buckets watched, reports received, assignments sent, and the requests Envoys reported.
//! `gateway/docs/envoy.md` lists them.
//!
//! An Envoy names any domain it likes: a domain is a label only when the Envoy files have it,
//! and every other is counted under `domain=""`, so that no client grows the series. A
//! bucket's values are never a label.

use metrics::SharedString;

/// The streams open (one per Envoy per instance).
const STREAMS_OPEN: &str = "gateway_quota_streams_open";
/// The buckets the open streams hold, by domain.
const BUCKETS_WATCHED: &str = "gateway_quota_buckets_watched";
/// The reports of a bucket received (one per bucket in each of Envoy's messages), by domain.
const REPORTS: &str = "gateway_quota_reports_total";
/// The assignments sent, by domain and `action` (`assign`, `abandon`).
const ASSIGNMENTS: &str = "gateway_quota_assignments_total";
/// The requests Envoys reported, by domain and `decision` (`allowed`, `denied`).
const REQUESTS: &str = "gateway_quota_requests_total";

/// A domain as a label: itself if `known` (the files have it), `""` otherwise.
pub(super) fn domain_label(domain: &str, known: bool) -> SharedString {
    if known {
        SharedString::from(std::sync::Arc::<str>::from(domain))
    } else {
        SharedString::const_str("")
    }
}

/// Every series of `domains` (and the streams' gauge) at 0, so that a dashboard tells "none
/// yet" from "not exported". Adds 0: a reload that calls it again never sets a count back.
pub(super) fn export<'a>(domains: impl Iterator<Item = &'a str>) {
    metrics::gauge!(STREAMS_OPEN).increment(0.0);
    for domain in domains {
        let domain = domain_label(domain, true);
        metrics::gauge!(BUCKETS_WATCHED, "domain" => domain.clone()).increment(0.0);
        metrics::counter!(REPORTS, "domain" => domain.clone()).increment(0);
        for action in ["assign", "abandon"] {
            metrics::counter!(ASSIGNMENTS, "domain" => domain.clone(), "action" => action)
                .increment(0);
        }
        for decision in ["allowed", "denied"] {
            metrics::counter!(REQUESTS, "domain" => domain.clone(), "decision" => decision)
                .increment(0);
        }
    }
}

/// A stream opened (`1.0`) or ended (`-1.0`).
pub(super) fn streams(change: f64) {
    metrics::gauge!(STREAMS_OPEN).increment(change);
}

/// Buckets of `domain` watched from now on (`1.0`) or no longer (`-1.0`).
pub(super) fn watched(domain: &SharedString, change: f64) {
    metrics::gauge!(BUCKETS_WATCHED, "domain" => domain.clone()).increment(change);
}

/// A report of a bucket of `domain`: `allowed` and `denied` requests.
pub(super) fn reported(domain: &SharedString, allowed: u64, denied: u64) {
    metrics::counter!(REPORTS, "domain" => domain.clone()).increment(1);
    metrics::counter!(REQUESTS, "domain" => domain.clone(), "decision" => "allowed")
        .increment(allowed);
    metrics::counter!(REQUESTS, "domain" => domain.clone(), "decision" => "denied")
        .increment(denied);
}

/// An action sent for a bucket of `domain`: an assignment, or the bucket abandoned.
pub(super) fn sent(domain: &SharedString, abandon: bool) {
    let action = if abandon { "abandon" } else { "assign" };
    metrics::counter!(ASSIGNMENTS, "domain" => domain.clone(), "action" => action).increment(1);
}
