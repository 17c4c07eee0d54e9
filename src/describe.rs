//! [`describe_metrics`]: what a metrics exporter says of the crate's metrics before and
//! beside their values (the table of them is `telemetry`'s). Above both the store (whose error
//! kinds label a metric) and the telemetry that records them.

/// Describes the crate's metrics to the installed recorder (the `# HELP` line and unit a
/// Prometheus exporter writes), and sets its counters without labels, and the store errors of
/// rate limits by kind, to 0: a dashboard then tells "none yet" from "not exported", and
/// `rate()` has a first sample. Call it once, after installing the recorder (as
/// `ratelimit-gateway` does on its admin address).
pub fn describe_metrics() {
    use metrics::{Unit, describe_counter, describe_histogram};

    use crate::store::StoreErrorKind;

    describe_counter!(
        "ratelimit_decisions_total",
        "Rate-limit decisions, by the plan whose policy decided, the rule they report and the outcome."
    );
    describe_counter!(
        "ratelimit_near_limit_total",
        "Admitted requests of an enforced limit that left a fifth of the rule's capacity or less."
    );
    describe_histogram!(
        "ratelimit_delay_seconds",
        Unit::Seconds,
        "How long admitted requests waited before they were served, of rules with a max_delay that smoothed a burst."
    );
    describe_counter!(
        "ratelimit_unknown_plan_total",
        "Requests whose plan is none of their layer's plans, limited by the default policy."
    );
    describe_histogram!(
        "ratelimit_store_seconds",
        Unit::Seconds,
        "How long store calls that needed I/O took."
    );
    describe_counter!(
        "ratelimit_store_errors_total",
        "Store calls that failed or missed their deadline, by what was limiting and the error's kind."
    );
    describe_counter!(
        "ratelimit_fallback_decisions_total",
        "Decisions by a Redis store's fallback while Redis failed."
    );
    describe_counter!(
        "ratelimit_denial_cache_hits_total",
        "Denials answered by the denial cache, without Redis."
    );
    describe_counter!(
        "ratelimit_shed_total",
        "Requests shed, by shedder and priority."
    );
    describe_counter!(
        "ratelimit_concurrency_refused_total",
        "Requests refused by a full concurrency slot, by limit."
    );
    describe_counter!(
        "ratelimit_region_calls_total",
        "The background calls of a region store, by call and outcome."
    );
    describe_counter!(
        "ratelimit_region_emergency_units_total",
        "Units a region cut off from the ledger granted itself."
    );
    for name in [
        "ratelimit_unknown_plan_total",
        "ratelimit_fallback_decisions_total",
        "ratelimit_denial_cache_hits_total",
        "ratelimit_region_emergency_units_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
    for kind in [
        StoreErrorKind::Timeout,
        StoreErrorKind::NeverSent,
        StoreErrorKind::ConnectionLost,
        StoreErrorKind::ErrorReply,
        StoreErrorKind::BadReply,
    ] {
        metrics::counter!(
            "ratelimit_store_errors_total",
            "limiting" => crate::telemetry::RATE_LIMITING,
            "kind" => kind.as_str()
        )
        .absolute(0);
    }
}
