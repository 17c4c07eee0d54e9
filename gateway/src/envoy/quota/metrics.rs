//! The quota service's metrics, on the admin address's `/metrics` beside the rate limit
//! service's (their descriptions are in `runtime::prometheus` with the others): streams open,
//! buckets watched, reports received, assignments sent, and the requests Envoys reported.
//! `gateway/docs/envoy.md` lists them.
//!
//! An Envoy names any domain it likes: a domain is a label only when the Envoy files have it,
//! and every other is counted under `domain=""`, so that no client grows the series. A
//! bucket's values are never a label.

use metrics::{Counter, Gauge, SharedString};

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

/// The series of one domain, looked up once per stream (again when its Envoy names another
/// domain) rather than per report.
#[derive(Clone)]
pub(super) struct Series {
    reports: Counter,
    allowed: Counter,
    denied: Counter,
    assigned: Counter,
    abandoned: Counter,
    /// The buckets watched: a bucket keeps a handle, to count itself out under the domain
    /// it was counted in.
    pub(super) watched: Gauge,
}

impl Series {
    /// The series of `domain`, labelled by it if `known` (the files have it), by `""`
    /// otherwise.
    pub(super) fn of(domain: &str, known: bool) -> Self {
        let domain = if known {
            SharedString::from(std::sync::Arc::<str>::from(domain))
        } else {
            SharedString::const_str("")
        };
        let labelled = |name: &'static str, label: &'static str, value: &'static str| metrics::counter!(name, "domain" => domain.clone(), label => value);
        Self {
            reports: metrics::counter!(REPORTS, "domain" => domain.clone()),
            allowed: labelled(REQUESTS, "decision", "allowed"),
            denied: labelled(REQUESTS, "decision", "denied"),
            assigned: labelled(ASSIGNMENTS, "action", "assign"),
            abandoned: labelled(ASSIGNMENTS, "action", "abandon"),
            watched: metrics::gauge!(BUCKETS_WATCHED, "domain" => domain.clone()),
        }
    }

    /// A report of a bucket: `allowed` and `denied` requests.
    pub(super) fn reported(&self, allowed: u64, denied: u64) {
        self.reports.increment(1);
        self.allowed.increment(allowed);
        self.denied.increment(denied);
    }

    /// An action sent for a bucket: an assignment, or the bucket abandoned.
    pub(super) fn sent(&self, abandon: bool) {
        if abandon {
            self.abandoned.increment(1);
        } else {
            self.assigned.increment(1);
        }
    }

    /// Every series at 0 (adds 0: a reload that calls it again never sets a count back).
    fn export(&self) {
        for counter in [
            &self.reports,
            &self.allowed,
            &self.denied,
            &self.assigned,
            &self.abandoned,
        ] {
            counter.increment(0);
        }
        self.watched.increment(0.0);
    }
}

/// Every series of `domains` (and the streams' gauge) at 0, so that a dashboard tells "none
/// yet" from "not exported".
pub(super) fn export<'a>(domains: impl Iterator<Item = &'a str>) {
    streams(0.0);
    for domain in domains {
        Series::of(domain, true).export();
    }
}

/// A stream opened (`1.0`) or ended (`-1.0`).
pub(super) fn streams(change: f64) {
    metrics::gauge!(STREAMS_OPEN).increment(change);
}
