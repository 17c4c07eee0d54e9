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

/// The `outcome` label of a rate-limit decision.
#[derive(Clone, Copy)]
pub(crate) enum Counted {
    Allowed,
    Denied,
    Never,
    ShadowAllowed,
    ShadowDenied,
    ShadowNever,
}

#[cfg(feature = "metrics")]
impl Counted {
    const ALL: [Counted; 6] = [
        Counted::Allowed,
        Counted::Denied,
        Counted::Never,
        Counted::ShadowAllowed,
        Counted::ShadowDenied,
        Counted::ShadowNever,
    ];

    fn label(self) -> &'static str {
        match self {
            Counted::Allowed => "allowed",
            Counted::Denied => "denied",
            Counted::Never => "never",
            Counted::ShadowAllowed => "shadow_allowed",
            Counted::ShadowDenied => "shadow_denied",
            Counted::ShadowNever => "shadow_never",
        }
    }
}

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use metrics::{Key, Label, Level, Metadata, SharedString};

    use super::Counted;
    use crate::policy::Rule;

    /// The `plan` label: the plan's shared name, or empty for a layer's default policy.
    /// Where the rate-limit metrics say they come from: what `metrics::counter!` written in this
    /// module would give them.
    static METADATA: Metadata<'static> =
        Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

    /// The keys of a rate limit's decision metrics, one set per plan and rule, built with the
    /// layer: a key built per request (its labels a `Vec`, its hash computed) took an allocation
    /// and about a twentieth of a request through the layer. They are registered with the
    /// recorder of the moment on every use, as `metrics::counter!` does, so a recorder installed
    /// after the layer was built (or local to a thread) still sees every decision.
    pub(crate) struct RateMetrics {
        /// Per plan (the default policy first), per rule of its policy, then one for a rule
        /// index the policy does not have (a custom store's), labelled with no rule.
        plans: Box<[Box<[RuleKeys]>]>,
    }

    /// The metric keys of one rule of one plan.
    struct RuleKeys {
        /// `ratelimit_decisions_total`, by [`Counted`] outcome.
        decisions: [Key; Counted::ALL.len()],
        near_limit: Key,
        delay: Key,
    }

    impl RuleKeys {
        fn new(plan: &SharedString, rule: &SharedString) -> Self {
            let labels = |outcome: Option<&'static str>| {
                let mut labels = vec![
                    Label::new("plan", plan.clone()),
                    Label::new("rule", rule.clone()),
                ];
                labels.extend(outcome.map(|outcome| Label::new("outcome", outcome)));
                labels
            };
            Self {
                decisions: Counted::ALL.map(|outcome| {
                    Key::from_parts("ratelimit_decisions_total", labels(Some(outcome.label())))
                }),
                near_limit: Key::from_parts("ratelimit_near_limit_total", labels(None)),
                delay: Key::from_parts("ratelimit_delay_seconds", labels(None)),
            }
        }
    }

    impl RateMetrics {
        /// The keys of each plan's rules: `plans` yields, per plan index, the plan's name (none
        /// for the default policy) and its policy's rules.
        pub(crate) fn new<'a>(
            plans: impl Iterator<Item = (Option<&'a Arc<str>>, &'a [Rule])>,
        ) -> Self {
            let plans = plans
                .map(|(plan, rules)| {
                    let plan = plan.map_or(SharedString::const_str(""), |plan| {
                        SharedString::from(Arc::clone(plan))
                    });
                    let named = rules
                        .iter()
                        .map(|rule| SharedString::from(Arc::clone(rule.shared_name())));
                    named
                        .chain([SharedString::const_str("")])
                        .map(|rule| RuleKeys::new(&plan, &rule))
                        .collect()
                })
                .collect();
            Self { plans }
        }

        /// The keys of the rule at `rule` of the plan at `plan`; those without a rule when its
        /// policy has no such rule.
        #[inline]
        fn keys(&self, plan: usize, rule: usize) -> &RuleKeys {
            let rules = &self.plans[plan];
            rules.get(rule).unwrap_or(&rules[rules.len() - 1])
        }

        #[inline]
        pub(crate) fn decision(&self, plan: usize, rule: usize, outcome: Counted) {
            let key = &self.keys(plan, rule).decisions[outcome as usize];
            metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA))
                .increment(1);
        }

        #[inline]
        pub(crate) fn near_limit(&self, plan: usize, rule: usize) {
            let key = &self.keys(plan, rule).near_limit;
            metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA))
                .increment(1);
        }

        #[inline]
        pub(crate) fn delay(&self, plan: usize, rule: usize, delay: Duration) {
            let key = &self.keys(plan, rule).delay;
            metrics::with_recorder(|recorder| recorder.register_histogram(key, &METADATA))
                .record(delay.as_secs_f64());
        }
    }

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

    use super::Counted;
    use crate::policy::Rule;

    /// Nothing to count without the `metrics` feature.
    pub(crate) struct RateMetrics;

    impl RateMetrics {
        pub(crate) fn new<'a>(_: impl Iterator<Item = (Option<&'a Arc<str>>, &'a [Rule])>) -> Self {
            RateMetrics
        }
        #[inline(always)]
        pub(crate) fn decision(&self, _: usize, _: usize, _: Counted) {}
        #[inline(always)]
        pub(crate) fn near_limit(&self, _: usize, _: usize) {}
        #[inline(always)]
        pub(crate) fn delay(&self, _: usize, _: usize, _: Duration) {}
    }

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
