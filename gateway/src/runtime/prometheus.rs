//! The process's Prometheus recorder, as its users read it: latencies as histograms with
//! buckets (which `sum by` aggregates across instances, unlike the exporter's default
//! summaries), a `# HELP` line for every metric, and counters exported at 0 before their first
//! event, so that a dashboard tells "none yet" from "not exported".

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// The buckets of every `*_seconds` histogram: from half a millisecond (a decision in
/// process) to the default upstream timeout.
const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Installs the recorder, and describes the library's metrics and the gateway's own.
pub(crate) fn install() -> Result<PrometheusHandle, BuildError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS)?
        .install_recorder()?;
    tower_redis_ratelimit::describe_metrics();
    describe_gateway();
    Ok(handle)
}

fn describe_gateway() {
    describe_counter!(
        "gateway_requests_total",
        "Requests answered, by what the limits decided and the answer's status class."
    );
    describe_histogram!(
        "gateway_request_duration_seconds",
        Unit::Seconds,
        "From a request's head read to its answer's head ready."
    );
    describe_counter!(
        "gateway_upstream_responses_total",
        "The upstream's answers to forwarded requests, by status class."
    );
    describe_counter!(
        "gateway_upstream_errors_total",
        "Forwarded requests the upstream did not answer: unreachable, or past upstream_timeout."
    );
    describe_counter!(
        "gateway_access_log_dropped_total",
        "Access log lines dropped because the writer's queue was full."
    );
    describe_gauge!(
        "gateway_connections_open",
        "Client connections open on the serving listeners (the admin address's not included)."
    );
    describe_gauge!(
        "gateway_quota_streams_open",
        "Envoys' rate limit quota streams open on this instance."
    );
    describe_gauge!(
        "gateway_quota_buckets_watched",
        "Buckets the open quota streams hold, by domain."
    );
    describe_counter!(
        "gateway_quota_reports_total",
        "Usage reports of a bucket received (one per bucket in each of Envoy's messages), by domain."
    );
    describe_counter!(
        "gateway_quota_assignments_total",
        "Bucket actions sent to Envoys, by domain and action (assign, abandon)."
    );
    describe_counter!(
        "gateway_quota_requests_total",
        "Requests Envoys reported deciding from their assignments, by domain and decision (allowed, denied)."
    );
    for (name, help) in [
        (
            "ratelimit_service_rate_limit_total_hits",
            "Hits of each Envoy limit.",
        ),
        (
            "ratelimit_service_rate_limit_within_limit",
            "Hits admitted.",
        ),
        (
            "ratelimit_service_rate_limit_near_limit",
            "Hits admitted past 80% of the limit.",
        ),
        (
            "ratelimit_service_rate_limit_over_limit",
            "Hits over the limit.",
        ),
        (
            "ratelimit_service_rate_limit_shadow_mode",
            "Hits over a shadow-mode limit, let through.",
        ),
        (
            "ratelimit_service_should_rate_limit_error",
            "Envoy requests answered by failure_mode.",
        ),
    ] {
        describe_counter!(name, help);
    }
    for decision in ["allowed", "denied", "skipped", "unlimited"] {
        for status in ["2xx", "4xx", "5xx"] {
            metrics::counter!(
                "gateway_requests_total",
                "decision" => decision,
                "status" => status
            )
            .absolute(0);
        }
    }
    for error in ["unreachable", "timeout"] {
        metrics::counter!("gateway_upstream_errors_total", "error" => error).absolute(0);
    }
    metrics::counter!("gateway_access_log_dropped_total").absolute(0);
    metrics::gauge!("gateway_connections_open").set(0.0);
}
