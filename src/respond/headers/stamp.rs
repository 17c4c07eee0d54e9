//! [`Stamp`]: what a layer will write on one response, small enough to ride in the response
//! future, turned into headers only once the response is there.
//!
//! When layers nest (a router-wide limit and a route limit), the response passes the inner layer
//! first. The single-valued headers (`Rate-Limiting-*`, `X-RateLimit-*`, `Retry-After`) are
//! written only where absent, so they describe the innermost layer, the one that refused when one
//! did; the IETF fields are lists, so every layer appends its policy and its state.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};

use super::HeaderFamilies;
#[cfg(feature = "concurrency")]
use super::concurrent::Concurrent;
use super::decided::Decided;
use super::format::{fill, retry_after};
use super::names::{RATELIMIT_POLICY, STATE};
use super::partition::Partition;
use super::quota_policy::RatePolicy;
use crate::decision::Decision;

/// What a response can tell about its request's limit.
#[derive(Clone, Debug)]
pub(crate) enum Report {
    /// A rate-limit decision.
    Decided(Decided),
    /// A concurrency decision.
    #[cfg(feature = "concurrency")]
    Concurrent(Concurrent),
    /// No decision was made, so only the static `RateLimit-Policy` can be told (when known), and
    /// why.
    Undecided {
        why: Undecided,
        policy: Option<HeaderValue>,
    },
    /// A load shedder's refusal: only when to retry.
    #[cfg(feature = "shed")]
    RetryAfter(Duration),
}

/// Why a request got no decision.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Undecided {
    /// The request had no key and was answered 400.
    MissingKey,
    /// The store failed and the layer failed open: `Rate-Limiting-State: Skipped`.
    Skipped,
    /// The store failed and the layer failed closed: `Retry-After: 1`.
    Unavailable,
}

impl Report {
    /// A decision on `policy`, made now.
    pub(crate) fn decided(
        decision: Decision,
        policy: &Arc<RatePolicy>,
        partition: Option<Partition>,
    ) -> Self {
        Report::Decided(Decided {
            decision,
            policy: policy.clone(),
            at: SystemTime::now(),
            partition,
            shadow: false,
        })
    }

    /// A decision on `policy` made now in shadow mode, to be told as such (see
    /// [`Decided::shadow`]).
    pub(crate) fn shadowed(decision: Decision, policy: &Arc<RatePolicy>) -> Self {
        Report::Decided(Decided {
            decision,
            policy: policy.clone(),
            at: SystemTime::now(),
            partition: None,
            shadow: true,
        })
    }

    /// No decision, for `why`; the static `policy` is announced when known. The policy is static,
    /// so a client learns its quota even from a 400 or while the store is down.
    pub(crate) fn undecided(why: Undecided, policy: Option<HeaderValue>) -> Self {
        Report::Undecided { why, policy }
    }
}

/// A report and the header families its layer writes.
#[derive(Clone, Debug)]
pub(crate) struct Stamp {
    families: HeaderFamilies,
    report: Report,
}

impl Stamp {
    pub(crate) fn new(families: HeaderFamilies, report: Report) -> Self {
        Self { families, report }
    }

    /// Writes the headers onto a response's.
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        let families = self.families;
        match self.report {
            Report::Decided(decided) => decided.apply(headers, families),
            #[cfg(feature = "concurrency")]
            Report::Concurrent(concurrent) => concurrent.apply(headers, families),
            Report::Undecided { why, policy } => {
                if let Some(policy) = policy.filter(|_| families.contains(HeaderFamilies::IETF)) {
                    headers.append(RATELIMIT_POLICY, policy);
                }
                match why {
                    Undecided::MissingKey => {}
                    Undecided::Skipped => {
                        if families.contains(HeaderFamilies::RATE_LIMITING) {
                            fill(headers, STATE, HeaderValue::from_static("Skipped"));
                        }
                    }
                    Undecided::Unavailable => retry_after(headers, Duration::from_secs(1)),
                }
            }
            #[cfg(feature = "shed")]
            Report::RetryAfter(after) => retry_after(headers, after),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::header::RETRY_AFTER;

    use super::*;

    /// The policy line of two rules.
    fn policy() -> Option<HeaderValue> {
        Some(HeaderValue::from_static(
            r#""per-10s";q=5;w=10, "burst";q=10;w=6"#,
        ))
    }

    fn header(families: HeaderFamilies, why: Undecided, policy: Option<HeaderValue>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        Stamp::new(families, Report::undecided(why, policy)).apply(&mut headers);
        headers
    }

    #[test]
    fn skipped_limiting_is_announced() {
        assert_eq!(
            header(HeaderFamilies::DEFAULT, Undecided::Skipped, None)[&STATE],
            "Skipped"
        );
        assert!(header(HeaderFamilies::IETF, Undecided::Skipped, None).is_empty());
    }

    #[test]
    fn without_a_decision_only_the_policy_and_what_happened_are_told() {
        let policy_line = r#""per-10s";q=5;w=10, "burst";q=10;w=6"#;
        let skipped = header(HeaderFamilies::ALL, Undecided::Skipped, policy());
        assert_eq!(skipped[&STATE], "Skipped");
        assert_eq!(skipped[&RATELIMIT_POLICY], policy_line);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        let unavailable = header(HeaderFamilies::ALL, Undecided::Unavailable, policy());
        assert_eq!(unavailable[&RATELIMIT_POLICY], policy_line);
        assert_eq!(unavailable[RETRY_AFTER], "1");
        assert_eq!(unavailable.len(), 2, "{unavailable:?}");
        let missing_key = header(HeaderFamilies::ALL, Undecided::MissingKey, policy());
        assert_eq!(missing_key[&RATELIMIT_POLICY], policy_line);
        assert_eq!(missing_key.len(), 1, "{missing_key:?}");
        // Without the IETF family there is nothing to say on a 400.
        let families = HeaderFamilies::RATE_LIMITING | HeaderFamilies::X_RATELIMIT;
        assert!(header(families, Undecided::MissingKey, policy()).is_empty());
        assert_eq!(header(families, Undecided::Skipped, policy()).len(), 1);
    }
}
