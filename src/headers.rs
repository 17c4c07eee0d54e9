//! The response headers that tell a client where it stands.
//!
//! | family | headers |
//! |---|---|
//! | [`Headers::RATE_LIMITING`] (seed 002) | `Rate-Limiting-Total-Requests`, `Rate-Limiting-State` (`Allow`, `Deny`, or `Skipped` when the store failed open), `Rate-Limiting-Expires-At` (RFC 3339, UTC, rounded up to the second) |
//! | [`Headers::IETF`] (draft-ietf-httpapi-ratelimit-headers-10) | `RateLimit-Policy: "name";q=5;w=10`, `RateLimit: "name";r=2;t=7` |
//! | [`Headers::X_RATELIMIT`] (GitHub style) | `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Used`, `X-RateLimit-Reset` (Unix epoch seconds, rounded up) |
//!
//! Only a decision fills them all. A response of a [`RateLimitLayer`](crate::RateLimitLayer)
//! without one carries what is known without it, in the chosen families: `RateLimit-Policy` (the
//! policy is static) on the 400 of a request without a key and on every response while the store
//! fails; `Rate-Limiting-State: Skipped` on a request that passed because the store failed open.
//!
//! `Retry-After` (whole seconds, rounded up, at least 1) is on every 429 and 503 whatever the set,
//! except the 429 of a request that can never pass ([`Outcome::Never`]): no wait would let it in,
//! so no wait is named.
//!
//! Times are always rounded up: a client that waits as long as it is told, or until the instant
//! it is given, gets in.

use std::ops::BitOr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};
use sfv::{KeyRef, ListSerializer, StringRef, integer, key_ref};

use crate::decision::{Decision, Outcome};
use crate::policy::{Policy, Rule};

/// Which families of rate-limit headers a layer writes. Combine with `|`.
///
/// ```
/// use tower_redis_ratelimit::Headers;
///
/// let headers = Headers::IETF | Headers::X_RATELIMIT;
/// assert!(headers.contains(Headers::IETF));
/// assert!(!headers.contains(Headers::RATE_LIMITING));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Headers(u8);

impl Headers {
    /// No rate-limit headers (`Retry-After` belongs to no family and is still sent where due).
    pub const NONE: Headers = Headers(0);
    /// Seed 002's `Rate-Limiting-*` headers.
    pub const RATE_LIMITING: Headers = Headers(1);
    /// The IETF draft's `RateLimit-Policy` and `RateLimit`.
    pub const IETF: Headers = Headers(2);
    /// GitHub-style `X-RateLimit-*`.
    pub const X_RATELIMIT: Headers = Headers(4);
    /// The default: `Rate-Limiting-*` and the IETF headers.
    pub const DEFAULT: Headers = Headers(1 | 2);
    /// Every family.
    pub const ALL: Headers = Headers(1 | 2 | 4);

    /// Whether every family of `other` is in this set.
    pub const fn contains(self, other: Headers) -> bool {
        self.0 & other.0 == other.0
    }
}

impl Default for Headers {
    fn default() -> Self {
        Headers::DEFAULT
    }
}

impl BitOr for Headers {
    type Output = Headers;

    fn bitor(self, rhs: Headers) -> Headers {
        Headers(self.0 | rhs.0)
    }
}

pub(crate) const TOTAL_REQUESTS: HeaderName =
    HeaderName::from_static("rate-limiting-total-requests");
pub(crate) const STATE: HeaderName = HeaderName::from_static("rate-limiting-state");
pub(crate) const EXPIRES_AT: HeaderName = HeaderName::from_static("rate-limiting-expires-at");
pub(crate) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub(crate) const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) const X_USED: HeaderName = HeaderName::from_static("x-ratelimit-used");
pub(crate) const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// What a layer will write on one response: small, so it rides in the response future, and turned
/// into headers only when the response is there.
///
/// When layers nest (a router-wide limit and a route limit), the response passes the inner layer
/// first. The single-valued headers (`Rate-Limiting-*`, `X-RateLimit-*`, `Retry-After`) are
/// written only where absent, so they describe the innermost layer, the one that denied when one
/// did; the IETF fields are lists, so every layer appends its policy and its state.
#[derive(Clone, Debug)]
pub(crate) struct Stamp {
    families: Headers,
    what: What,
}

#[derive(Clone, Debug)]
enum What {
    /// No decision was made, so only the static `RateLimit-Policy` can be told (when known).
    Undecided {
        why: Undecided,
        policy: Option<HeaderValue>,
    },
    /// The store decided, at `at`.
    Decided {
        decision: Decision,
        policy: Policy,
        at: SystemTime,
    },
    /// A concurrency limit admitted or refused a request.
    InFlight(crate::concurrency::headers::InFlight),
}

#[derive(Clone, Copy, Debug)]
enum Undecided {
    /// The request had no key and was answered 400.
    MissingKey,
    /// The store failed and the layer failed open.
    Skipped,
    /// The store failed and the layer failed closed.
    Unavailable,
}

impl Stamp {
    /// The headers for a decision on `policy`, made now.
    pub(crate) fn for_decision(decision: Decision, policy: &Policy, families: Headers) -> Self {
        let what = What::Decided {
            decision,
            policy: policy.clone(),
            at: SystemTime::now(),
        };
        Self { families, what }
    }

    /// The headers of a request that passed unchecked because the store failed (fail open).
    pub(crate) fn skipped(families: Headers) -> Self {
        Self::undecided(Undecided::Skipped, families)
    }

    /// The headers of a request refused because the store failed (fail closed): `Retry-After: 1`.
    pub(crate) fn unavailable(families: Headers) -> Self {
        Self::undecided(Undecided::Unavailable, families)
    }

    /// The headers of a request refused because it had no key.
    pub(crate) fn missing_key(families: Headers) -> Self {
        Self::undecided(Undecided::MissingKey, families)
    }

    fn undecided(why: Undecided, families: Headers) -> Self {
        Self {
            families,
            what: What::Undecided { why, policy: None },
        }
    }

    /// Names `policy` in `RateLimit-Policy` on a response without a decision. The policy is
    /// static, so a client learns its quota even from a 400 or while the store is down. The stamp
    /// of a decision names its policy already and is returned unchanged.
    pub(crate) fn with_policy(self, policy: &Policy) -> Self {
        self.with_policy_header(policy.header().clone())
    }

    /// [`with_policy`](Self::with_policy) with the header value already made (a concurrency
    /// limit's).
    pub(crate) fn with_policy_header(mut self, header: HeaderValue) -> Self {
        if let What::Undecided {
            policy: announced, ..
        } = &mut self.what
        {
            *announced = Some(header);
        }
        self
    }

    /// The headers of a concurrency decision.
    pub(crate) fn in_flight(
        families: Headers,
        in_flight: crate::concurrency::headers::InFlight,
    ) -> Self {
        Self {
            families,
            what: What::InFlight(in_flight),
        }
    }

    /// Writes the headers onto a response's.
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        let families = self.families;
        match self.what {
            What::Undecided { why, policy } => {
                if let Some(policy) = policy.filter(|_| families.contains(Headers::IETF)) {
                    headers.append(RATELIMIT_POLICY, policy);
                }
                match why {
                    Undecided::MissingKey => {}
                    Undecided::Skipped => {
                        if families.contains(Headers::RATE_LIMITING) {
                            fill(headers, STATE, HeaderValue::from_static("Skipped"));
                        }
                    }
                    Undecided::Unavailable => retry_after(headers, Duration::from_secs(1)),
                }
            }
            What::Decided {
                decision,
                policy,
                at,
            } => decided(headers, families, &decision, &policy, at),
            What::InFlight(in_flight) => in_flight.apply(headers, families),
        }
    }
}

fn decided(
    headers: &mut HeaderMap,
    families: Headers,
    decision: &Decision,
    policy: &Policy,
    at: SystemTime,
) {
    // The exact instant; `rfc3339` and `epoch_seconds` round it up, never down, so a client that
    // waits until then finds the period over.
    let reset_at = at + decision.reset_after();
    if families.contains(Headers::RATE_LIMITING) {
        let state = if decision.is_allowed() {
            "Allow"
        } else {
            "Deny"
        };
        fill(headers, TOTAL_REQUESTS, HeaderValue::from(decision.used()));
        fill(headers, STATE, HeaderValue::from_static(state));
        fill(headers, EXPIRES_AT, rfc3339(reset_at));
    }
    if families.contains(Headers::IETF) {
        headers.append(RATELIMIT_POLICY, policy.header().clone());
        // A custom store may report a rule index of another policy: without the rule there is no
        // line to write, and a line about another rule would mislead.
        if let Some(rule) = policy.rules().get(decision.rule_index()) {
            headers.append(RATELIMIT, limit_header(rule, decision));
        }
    }
    if families.contains(Headers::X_RATELIMIT) {
        let reset = epoch_seconds(reset_at);
        fill(headers, X_LIMIT, HeaderValue::from(decision.limit()));
        fill(
            headers,
            X_REMAINING,
            HeaderValue::from(decision.remaining()),
        );
        fill(headers, X_USED, HeaderValue::from(decision.used()));
        fill(headers, X_RESET, HeaderValue::from(reset));
    }
    if decision.outcome() == Outcome::Denied {
        retry_after(headers, decision.retry_after().unwrap_or_default());
    }
}

/// Sets a single-valued header unless a custom rejection or an inner layer already did.
pub(crate) fn fill(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    headers.entry(name).or_insert(value);
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after(headers: &mut HeaderMap, after: Duration) {
    let seconds = whole_seconds(after).as_secs().max(1);
    fill(headers, RETRY_AFTER, HeaderValue::from(seconds));
}

/// `RateLimit-Policy`: every rule, as `"name";q=<capacity>;w=<seconds>`.
pub(crate) fn policy_header(rules: &[Rule]) -> HeaderValue {
    let mut list = ListSerializer::new();
    for rule in rules {
        list.bare_item(name(rule))
            .parameter(key_ref("q"), sf_integer(u64::from(rule.capacity())))
            .parameter(
                key_ref("w"),
                sf_integer(whole_seconds(rule.window()).as_secs().max(1)),
            );
    }
    header_value(list.finish().unwrap_or_default())
}

/// `RateLimit`: the reported rule, as `"name";r=<remaining>;t=<seconds until reset>`.
fn limit_header(rule: &Rule, decision: &Decision) -> HeaderValue {
    let mut list = ListSerializer::new();
    list.bare_item(name(rule))
        .parameter(KeyRef::constant("r"), sf_integer(decision.remaining()))
        .parameter(
            KeyRef::constant("t"),
            sf_integer(whole_seconds(decision.reset_after()).as_secs()),
        );
    header_value(list.finish().unwrap_or_default())
}

fn name(rule: &Rule) -> &StringRef {
    // Rule names are validated to a subset of sf-string characters.
    StringRef::from_str(rule.name()).unwrap_or(StringRef::constant("invalid"))
}

/// Structured-field integers have at most 15 digits.
pub(crate) fn sf_integer(value: u64) -> sfv::Integer {
    integer(value.min(999_999_999_999_999) as i64)
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

/// RFC 3339 in UTC with whole seconds, as Go's `time.RFC3339` prints it (seed 002). The instant
/// is rounded up to the second: formatting alone would truncate it and name a moment before it.
pub(crate) fn rfc3339(time: SystemTime) -> HeaderValue {
    let second = UNIX_EPOCH + Duration::from_secs(epoch_seconds(time));
    header_value(humantime::format_rfc3339_seconds(second).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::RuleVerdict;
    use crate::{Quota, Rule};

    fn policy() -> Policy {
        Policy::new([
            Rule::fixed_window("per-10s", Quota::new(5, Duration::from_secs(10))),
            Rule::gcra("burst", Quota::per_minute(100).with_burst(10)),
        ])
        .unwrap()
    }

    fn header(stamp: Stamp) -> HeaderMap {
        let mut headers = HeaderMap::new();
        stamp.apply(&mut headers);
        headers
    }

    #[test]
    fn policy_header_lists_every_rule_in_draft_10_syntax() {
        assert_eq!(policy().header(), r#""per-10s";q=5;w=10, "burst";q=10;w=6"#);
        let sub_second = Policy::try_from(Rule::fixed_window(
            "fast",
            Quota::new(10, Duration::from_millis(100)),
        ));
        assert_eq!(sub_second.unwrap().header(), r#""fast";q=10;w=1"#);
    }

    #[test]
    fn an_allowed_decision_carries_every_family() {
        let verdict = RuleVerdict::new(
            Outcome::Allowed,
            2,
            3,
            Duration::from_micros(6_000_001),
            Duration::ZERO,
        );
        let decision = Decision::from_verdicts(
            &policy(),
            &[
                verdict,
                RuleVerdict::new(
                    Outcome::Allowed,
                    9,
                    1,
                    Duration::from_secs(1),
                    Duration::ZERO,
                ),
            ],
        );
        let headers = header(Stamp::for_decision(
            decision.clone(),
            &policy(),
            Headers::ALL,
        ));
        assert_eq!(headers[&TOTAL_REQUESTS], "3");
        assert_eq!(headers[&STATE], "Allow");
        assert_eq!(headers[&RATELIMIT], r#""per-10s";r=2;t=7"#);
        assert_eq!(headers[&X_LIMIT], "5");
        assert_eq!(headers[&X_REMAINING], "2");
        assert_eq!(headers[&X_USED], "3");
        assert!(headers.get(RETRY_AFTER).is_none());
        let expires = humantime::parse_rfc3339(headers[&EXPIRES_AT].to_str().unwrap()).unwrap();
        let ahead = expires
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        // Rounded up from 6.000001 s after the decision, read here a little later.
        assert!(
            ahead > Duration::from_secs(5) && ahead < Duration::from_micros(7_000_001),
            "{ahead:?}"
        );
        assert!(headers[&EXPIRES_AT].to_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn reset_instants_are_rounded_up_to_the_second_never_down() {
        let verdict =
            |reset_after| RuleVerdict::new(Outcome::Allowed, 4, 1, reset_after, Duration::ZERO);
        // 1_700_000_000 s after the epoch is 2023-11-14T22:13:20Z.
        let epoch = |seconds: f64| UNIX_EPOCH + Duration::from_secs_f64(seconds);
        for (at, reset_after, expires_at, reset) in [
            // A fraction in the decision's instant: truncating would say 22:13:30, before the reset.
            (
                epoch(1_700_000_000.25),
                Duration::from_secs(10),
                "2023-11-14T22:13:31Z",
                "1700000011",
            ),
            // A fraction in the wait.
            (
                epoch(1_700_000_000.0),
                Duration::from_micros(9_000_001),
                "2023-11-14T22:13:30Z",
                "1700000010",
            ),
            // Exactly on a second: nothing to round.
            (
                epoch(1_700_000_000.0),
                Duration::from_secs(10),
                "2023-11-14T22:13:30Z",
                "1700000010",
            ),
        ] {
            let decision = Decision::from_verdicts(&policy(), &[verdict(reset_after)]);
            let mut headers = HeaderMap::new();
            decided(&mut headers, Headers::ALL, &decision, &policy(), at);
            assert_eq!(headers[&EXPIRES_AT], expires_at, "{at:?} + {reset_after:?}");
            assert_eq!(headers[&X_RESET], reset, "{at:?} + {reset_after:?}");
        }
    }

    #[test]
    fn a_denial_says_deny_and_when_to_retry_rounded_up() {
        let verdict = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_millis(2_001),
        );
        let decision = Decision::from_verdicts(&policy(), &[verdict]);
        let headers = header(Stamp::for_decision(
            decision.clone(),
            &policy(),
            Headers::DEFAULT,
        ));
        assert_eq!(headers[&STATE], "Deny");
        assert_eq!(headers[RETRY_AFTER], "3");
        assert!(headers.get(&X_LIMIT).is_none());
        let tiny = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_micros(1),
        );
        let decision = Decision::from_verdicts(&policy(), &[tiny]);
        assert_eq!(
            header(Stamp::for_decision(
                decision.clone(),
                &policy(),
                Headers::NONE
            ))[RETRY_AFTER],
            "1"
        );
    }

    #[test]
    fn ietf_headers_append_and_custom_retry_after_is_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("60"));
        headers.insert(
            RATELIMIT_POLICY,
            HeaderValue::from_static(r#""inner";q=1;w=1"#),
        );
        let verdict = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(8),
            Duration::from_secs(2),
        );
        let decision = Decision::from_verdicts(&policy(), &[verdict]);
        Stamp::for_decision(decision.clone(), &policy(), Headers::IETF).apply(&mut headers);
        assert_eq!(headers[RETRY_AFTER], "60");
        assert_eq!(headers.get_all(&RATELIMIT_POLICY).iter().count(), 2);
    }

    #[test]
    fn skipped_limiting_is_announced() {
        assert_eq!(header(Stamp::skipped(Headers::DEFAULT))[&STATE], "Skipped");
        assert!(header(Stamp::skipped(Headers::IETF)).is_empty());
    }

    #[test]
    fn without_a_decision_only_the_policy_and_what_happened_are_told() {
        let policy_line = r#""per-10s";q=5;w=10, "burst";q=10;w=6"#;
        let skipped = header(Stamp::skipped(Headers::ALL).with_policy(&policy()));
        assert_eq!(skipped[&STATE], "Skipped");
        assert_eq!(skipped[&RATELIMIT_POLICY], policy_line);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        let unavailable = header(Stamp::unavailable(Headers::ALL).with_policy(&policy()));
        assert_eq!(unavailable[&RATELIMIT_POLICY], policy_line);
        assert_eq!(unavailable[RETRY_AFTER], "1");
        assert_eq!(unavailable.len(), 2, "{unavailable:?}");
        let missing_key = header(Stamp::missing_key(Headers::ALL).with_policy(&policy()));
        assert_eq!(missing_key[&RATELIMIT_POLICY], policy_line);
        assert_eq!(missing_key.len(), 1, "{missing_key:?}");
        // Without the IETF family there is nothing to say on a 400.
        let families = Headers::RATE_LIMITING | Headers::X_RATELIMIT;
        assert!(header(Stamp::missing_key(families).with_policy(&policy())).is_empty());
        assert_eq!(
            header(Stamp::skipped(families).with_policy(&policy())).len(),
            1
        );
    }
}
