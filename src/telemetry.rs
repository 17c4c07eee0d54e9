//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`): what the
//! limiters decide, how their stores behave, and what their fallbacks and caches answer. Without
//! the feature every function here is empty and compiles away.
//!
//! | metric | kind | labels | counts |
//! |---|---|---|---|
//! | `ratelimit_decisions_total` | counter | `plan`, `rule`, `outcome` (`allowed`, `denied`, `never`; in shadow mode `shadow_allowed`, `shadow_denied`, `shadow_never`) | rate-limit decisions, by the plan whose policy decided (empty: the default) and the rule they report |
//! | `ratelimit_near_limit_total` | counter | `plan`, `rule` | admitted requests of an enforced limit that left a fifth of the rule's capacity or less (80% used) |
//! | `ratelimit_delay_seconds` | histogram | `plan`, `rule` | how long admitted requests waited before they were served, of rules with a [`max_delay`](crate::Rule::with_max_delay) that smoothed a burst (only requests that waited: its count is theirs) |
//! | `ratelimit_unknown_plan_total` | counter | | requests whose plan none of their layer's plans is: limited by the default policy |
//! | `ratelimit_store_seconds` | histogram | `limiting` (`rate limiting`, `concurrency limiting`, ...) | how long store calls that needed I/O took |
//! | `ratelimit_store_errors_total` | counter | `limiting`, `kind` ([`StoreErrorKind`](crate::store::StoreErrorKind)) | store calls that failed or missed their deadline, those a Redis store's fallback answered in Redis's place and its quota leases' background calls included |
//! | `ratelimit_fallback_decisions_total` | counter | | decisions by a Redis store's fallback |
//! | `ratelimit_denial_cache_hits_total` | counter | | denials answered by the denial cache, without Redis |
//! | `ratelimit_shed_total` | counter | `shedder` (`utilization`, `fleet`), `priority` | requests shed |
//! | `ratelimit_concurrency_refused_total` | counter | `limit` | requests refused by a full concurrency slot |
//! | `ratelimit_region_calls_total` | counter | `call` (`lead`, `sync`, `take`, `apply`, `surrender`, `credit`), `outcome` (`ok`, `error`) | the background calls of a [`RegionStore`](crate::store::region::RegionStore): demand reported, allotments moved |
//! | `ratelimit_region_emergency_units_total` | counter | | units a region cut off from the ledger granted itself (emergency mode) |

/// The `limiting` label of what rate limits ask their stores: a rate limit's decisions, and the
/// calls a Redis store makes on their behalf (its fallback's, its quota leases' in the
/// background), which count their errors themselves.
pub(crate) const RATE_LIMITING: &str = "rate limiting";

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use metrics::SharedString;

    use crate::policy::Rule;

    /// The `plan` label: the plan's shared name, or empty for a layer's default policy.
    fn plan_label(plan: Option<&Arc<str>>) -> SharedString {
        plan.map_or(SharedString::const_str(""), |plan| {
            SharedString::from(Arc::clone(plan))
        })
    }

    /// The `rule` label: the rule's shared name (a reference count, not an allocation per
    /// request, which the metrics facade would pay even with no recorder installed), or empty
    /// when a custom store reports a rule the policy lacks.
    fn rule_label(rule: Option<&Rule>) -> SharedString {
        rule.map_or(SharedString::const_str(""), |rule| {
            SharedString::from(Arc::clone(rule.shared_name()))
        })
    }

    /// A rate-limit decision on `rule` of `plan`'s policy.
    #[inline]
    pub(crate) fn decision(plan: Option<&Arc<str>>, rule: Option<&Rule>, outcome: &'static str) {
        metrics::counter!(
            "ratelimit_decisions_total",
            "plan" => plan_label(plan),
            "rule" => rule_label(rule),
            "outcome" => outcome
        )
        .increment(1);
    }

    /// An admitted request that left at most a fifth of the capacity of `rule` of `plan`'s policy.
    #[inline]
    pub(crate) fn near_limit(plan: Option<&Arc<str>>, rule: Option<&Rule>) {
        metrics::counter!(
            "ratelimit_near_limit_total",
            "plan" => plan_label(plan),
            "rule" => rule_label(rule)
        )
        .increment(1);
    }

    /// An admitted request that waits `delay` before it is served, queued by `rule` of `plan`'s
    /// policy.
    #[inline]
    pub(crate) fn delay(plan: Option<&Arc<str>>, rule: Option<&Rule>, delay: Duration) {
        metrics::histogram!(
            "ratelimit_delay_seconds",
            "plan" => plan_label(plan),
            "rule" => rule_label(rule)
        )
        .record(delay.as_secs_f64());
    }

    /// A request whose plan is none of its layer's.
    #[inline]
    pub(crate) fn unknown_plan() {
        metrics::counter!("ratelimit_unknown_plan_total").increment(1);
    }

    /// A store call that needed I/O, and how long it took.
    #[inline]
    pub(crate) fn store_call(limiting: &'static str, took: Duration) {
        metrics::histogram!("ratelimit_store_seconds", "limiting" => limiting)
            .record(took.as_secs_f64());
    }

    /// A store call that failed or missed its deadline.
    #[inline]
    pub(crate) fn store_error(limiting: &'static str, kind: &'static str) {
        metrics::counter!(
            "ratelimit_store_errors_total",
            "limiting" => limiting,
            "kind" => kind
        )
        .increment(1);
    }

    /// A decision by a Redis store's fallback.
    #[inline]
    #[cfg(feature = "redis")]
    pub(crate) fn fallback() {
        metrics::counter!("ratelimit_fallback_decisions_total").increment(1);
    }

    /// A denial answered by the denial cache.
    #[inline]
    #[cfg(feature = "redis")]
    pub(crate) fn denial_cache_hit() {
        metrics::counter!("ratelimit_denial_cache_hits_total").increment(1);
    }

    /// A request shed by `shedder` at `priority`.
    #[inline]
    #[cfg(feature = "shed")]
    pub(crate) fn shed(shedder: &'static str, priority: &'static str) {
        metrics::counter!("ratelimit_shed_total", "shedder" => shedder, "priority" => priority)
            .increment(1);
    }

    /// A background call of a region store.
    #[inline]
    #[cfg(feature = "regions")]
    pub(crate) fn region_call(call: &'static str, outcome: &'static str) {
        metrics::counter!("ratelimit_region_calls_total", "call" => call, "outcome" => outcome)
            .increment(1);
    }

    /// Units a region cut off from the ledger granted itself.
    #[inline]
    #[cfg(feature = "regions")]
    pub(crate) fn region_emergency_units(units: u64) {
        metrics::counter!("ratelimit_region_emergency_units_total").increment(units);
    }

    /// A request refused by the full slot of concurrency limit `limit`.
    #[inline]
    #[cfg(feature = "concurrency")]
    pub(crate) fn concurrency_refused(limit: &str) {
        metrics::counter!("ratelimit_concurrency_refused_total", "limit" => limit.to_owned())
            .increment(1);
    }
}

#[cfg(not(feature = "metrics"))]
#[allow(clippy::missing_const_for_fn)]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::policy::Rule;

    #[inline(always)]
    pub(crate) fn decision(_: Option<&Arc<str>>, _: Option<&Rule>, _: &'static str) {}
    #[inline(always)]
    pub(crate) fn near_limit(_: Option<&Arc<str>>, _: Option<&Rule>) {}
    #[inline(always)]
    pub(crate) fn delay(_: Option<&Arc<str>>, _: Option<&Rule>, _: Duration) {}

    pub(crate) fn unknown_plan() {}
    #[inline(always)]
    pub(crate) fn store_call(_: &'static str, _: Duration) {}
    #[inline(always)]
    pub(crate) fn store_error(_: &'static str, _: &'static str) {}
    #[inline(always)]
    #[cfg(feature = "redis")]
    pub(crate) fn fallback() {}
    #[inline(always)]
    #[cfg(feature = "redis")]
    pub(crate) fn denial_cache_hit() {}
    #[inline(always)]
    #[cfg(feature = "shed")]
    pub(crate) fn shed(_: &'static str, _: &'static str) {}
    #[inline(always)]
    #[cfg(feature = "concurrency")]
    pub(crate) fn concurrency_refused(_: &str) {}
    #[inline(always)]
    #[cfg(feature = "regions")]
    pub(crate) fn region_call(_: &'static str, _: &'static str) {}
    #[inline(always)]
    #[cfg(feature = "regions")]
    pub(crate) fn region_emergency_units(_: u64) {}
}

pub(crate) use enabled::*;
