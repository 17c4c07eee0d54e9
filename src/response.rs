//! The responses a layer answers with instead of calling the service, and the hook to change them.
//!
//! Defaults are RFC 9457 problem details (`application/problem+json`):
//!
//! | rejection | status | body `detail` |
//! |---|---|---|
//! | over the quota | 429 | which rule, its quota, and when to retry |
//! | cost larger than the quota can ever hold | 429, no `Retry-After` | that retrying will never help |
//! | no key in the request | 400 | what was missing, from the [`KeyError`] |
//! | store unavailable, [fail closed](crate::FailureMode::Closed) | 503 | that limiting is unavailable |
//! | no free concurrency slot ([`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer)) | 429 | which limit, how many in flight, when to retry |
//! | shed by the [fleet shedder](crate::shed::FleetShedLayer) | 503 | which priority was shed, and when to retry |
//! | shed by the [utilisation shedder](crate::UtilizationShedLayer) | 503 | that the service is overloaded, the request's priority |
//!
//! The layer adds the rate-limit headers and `Retry-After` afterwards, to default and custom
//! responses alike (a custom `Retry-After` is kept).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;

use crate::concurrency::Busy;
use crate::decision::{Decision, Outcome};
use crate::error::StoreError;
use crate::headers::whole_seconds;
use crate::key::KeyError;
use crate::policy::{Policy, Rule};
use crate::shed::{Priority, Shedding};

/// Why a request was answered by the rate limiter rather than the service.
#[derive(Debug)]
#[non_exhaustive]
pub enum Rejection<'a> {
    /// Over the quota ([`Outcome::Denied`]) or never admissible ([`Outcome::Never`]).
    Limited {
        /// The decision.
        decision: &'a Decision,
        /// The policy that was checked.
        policy: &'a Policy,
        /// The request's cost.
        cost: u32,
    },
    /// No key could be extracted and the layer rejects such requests.
    MissingKey(&'a KeyError),
    /// The store failed and the layer fails closed.
    Unavailable(&'a StoreError),
    /// The [utilisation shedder](crate::UtilizationShedLayer) refused the request to protect an overloaded service.
    Shed(&'a Shedding),
    /// A [concurrency limit](crate::ConcurrencyLimitLayer) has no free slot for this key (429).
    TooManyInFlight(&'a Busy),
    /// The [fleet shedder](crate::shed::FleetShedLayer) refused this request's priority (503).
    FleetShed(&'a Busy),
}

impl Rejection<'_> {
    /// The status of the default response: 429, 400 or 503.
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::Limited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Rejection::MissingKey(_) => StatusCode::BAD_REQUEST,
            Rejection::Unavailable(_) | Rejection::Shed(_) | Rejection::FleetShed(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Rejection::TooManyInFlight(_) => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The default response: a problem+json body saying what happened.
    pub fn default_response(&self) -> Response<Bytes> {
        let status = self.status();
        let mut problem = Problem {
            r#type: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: String::new(),
            policy: None,
            limit: None,
            retry_after: None,
            priority: None,
        };
        match self {
            Rejection::Limited {
                decision,
                policy,
                cost,
            } => {
                // A custom store may report a rule index of another policy: then no rule is named.
                let rule = policy.rules().get(decision.rule_index());
                let named = Named(rule);
                problem.policy = rule.map(|rule| rule.name().to_owned());
                problem.limit = Some(decision.limit());
                problem.detail = match decision.outcome() {
                    Outcome::Never => format!(
                        "This request costs {cost} but the rate limit{named} admits at most {} at once; \
                         it can never be allowed, so do not retry it.",
                        decision.limit()
                    ),
                    _ => {
                        let seconds = retry_seconds(decision);
                        problem.retry_after = Some(seconds);
                        format!(
                            "Rate limit{named} exceeded. Retry after {seconds} second{}.",
                            if seconds == 1 { "" } else { "s" }
                        )
                    }
                };
            }
            Rejection::MissingKey(err) => {
                problem.detail = format!("This request cannot be rate limited: {}.", err.message());
            }
            Rejection::Unavailable(_) => {
                problem.retry_after = Some(1);
                problem.detail = "Rate limiting is temporarily unavailable, so requests are refused. Retry shortly.".into();
            }
            Rejection::Shed(shedding) => {
                let seconds = whole_seconds(shedding.retry_after()).as_secs().max(1);
                problem.retry_after = Some(seconds);
                problem.priority = Some(shedding.priority());
                problem.detail = format!(
                    "The service is overloaded and refuses {:.0}% of {} priority requests to recover. \
                     Retry after {seconds} second{}.",
                    shedding.drop_probability() * 100.0,
                    shedding.priority(),
                    if seconds == 1 { "" } else { "s" }
                );
            }
            Rejection::TooManyInFlight(busy) | Rejection::FleetShed(busy) => {
                let seconds = whole_seconds(busy.retry_after()).as_secs().max(1);
                problem.policy = Some(busy.name().to_owned());
                problem.limit = Some(u64::from(busy.limit()));
                problem.retry_after = Some(seconds);
                problem.priority = busy.priority();
                let plural = if seconds == 1 { "" } else { "s" };
                problem.detail = match busy.priority() {
                    None => format!(
                        "Concurrency limit \"{}\" ({} at once) reached: {} requests are in flight. \
                         Retry after {seconds} second{plural}.",
                        busy.name(),
                        busy.limit(),
                        busy.in_flight()
                    ),
                    Some(priority) => format!(
                        "The service is shedding load: {priority} requests may use {} of {} slots \
                         and {} are in use. Retry after {seconds} second{plural}.",
                        busy.limit(),
                        busy.capacity(),
                        busy.in_flight()
                    ),
                };
            }
        }
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = Response::new(Bytes::from(body));
        *response.status_mut() = status;
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}

pub(crate) type RejectFn = dyn Fn(&Rejection<'_>) -> Response<Bytes> + Send + Sync;

/// How a layer answers a rejection: with the user's `on_rejection` hook, or the default response.
#[derive(Clone, Default)]
pub(crate) struct Responder(Option<Arc<RejectFn>>);

impl Responder {
    /// Answers with `respond`, whatever body type it builds.
    pub(crate) fn custom<F, B>(respond: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<B> + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        Responder(Some(Arc::new(move |rejection: &Rejection<'_>| {
            respond(rejection).map(Into::into)
        })))
    }

    /// The response to `rejection`, before the layer adds its headers.
    pub(crate) fn respond(&self, rejection: &Rejection<'_>) -> Response<Bytes> {
        match &self.0 {
            Some(respond) => respond(rejection),
            None => rejection.default_response(),
        }
    }
}

/// ` "name" (quota)` of the rule a 429 is about, or nothing when it is unknown; written into the
/// detail in place, without an allocation of its own.
struct Named<'a>(Option<&'a Rule>);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(rule) => write!(f, " \"{}\" ({})", rule.name(), rule.quota()),
            None => Ok(()),
        }
    }
}

fn retry_seconds(decision: &Decision) -> u64 {
    whole_seconds(decision.retry_after().unwrap_or_default())
        .as_secs()
        .max(1)
}

#[derive(Serialize)]
struct Problem {
    r#type: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<Priority>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::decision::RuleVerdict;
    use crate::{Quota, Rule};

    fn json(response: &Response<Bytes>) -> serde_json::Value {
        assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
        serde_json::from_slice(response.body()).unwrap()
    }

    #[test]
    fn a_429_names_the_rule_and_the_wait() {
        let policy = Policy::try_from(Rule::fixed_window(
            "hello",
            Quota::new(5, Duration::from_secs(10)),
        ))
        .unwrap();
        let verdict = RuleVerdict::new(
            Outcome::Denied,
            0,
            5,
            Duration::from_secs(7),
            Duration::from_millis(6_500),
        );
        let decision = Decision::from_verdicts(&policy, &[verdict]);
        let response = Rejection::Limited {
            decision: &decision,
            policy: &policy,
            cost: 1,
        }
        .default_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let body = json(&response);
        assert_eq!(body["status"], 429);
        assert_eq!(body["policy"], "hello");
        assert_eq!(body["retry_after"], 7);
        assert_eq!(
            body["detail"],
            "Rate limit \"hello\" (5 per 10s) exceeded. Retry after 7 seconds."
        );
    }

    #[test]
    fn a_request_that_can_never_pass_says_so_without_a_retry() {
        let policy =
            Policy::try_from(Rule::gcra("upload", Quota::per_second(10).with_burst(4))).unwrap();
        let verdict = RuleVerdict::new(Outcome::Never, 4, 0, Duration::ZERO, Duration::ZERO);
        let decision = Decision::from_verdicts(&policy, &[verdict]);
        let body = json(
            &Rejection::Limited {
                decision: &decision,
                policy: &policy,
                cost: 9,
            }
            .default_response(),
        );
        assert!(body.get("retry_after").is_none());
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("can never be allowed"),
            "{body}"
        );
    }

    #[test]
    fn a_decision_about_a_rule_the_policy_lacks_names_no_rule() {
        // A custom store answered with a decision about the second rule of another policy.
        let other = Policy::new([
            Rule::gcra("a", Quota::per_second(10)),
            Rule::gcra("b", Quota::per_second(10).with_burst(4)),
        ])
        .unwrap();
        let policy = Policy::try_from(Rule::gcra("only", Quota::per_second(10))).unwrap();
        for (verdict, cost, detail) in [
            (
                RuleVerdict::new(
                    Outcome::Denied,
                    0,
                    4,
                    Duration::from_secs(1),
                    Duration::from_millis(100),
                ),
                1,
                "Rate limit exceeded. Retry after 1 second.",
            ),
            (
                RuleVerdict::new(Outcome::Never, 4, 0, Duration::ZERO, Duration::ZERO),
                9,
                "This request costs 9 but the rate limit admits at most 4 at once; \
                 it can never be allowed, so do not retry it.",
            ),
        ] {
            let allowed = RuleVerdict::new(Outcome::Allowed, 9, 1, Duration::ZERO, Duration::ZERO);
            let decision = Decision::from_verdicts(&other, &[allowed, verdict]);
            assert_eq!(decision.rule_index(), 1);
            let body = json(
                &Rejection::Limited {
                    decision: &decision,
                    policy: &policy,
                    cost,
                }
                .default_response(),
            );
            assert_eq!(body["detail"], detail);
            assert!(body.get("policy").is_none(), "{body}");
            assert_eq!(body["limit"], 4);
        }
    }

    #[test]
    fn missing_keys_and_outages_have_their_own_status() {
        let err = KeyError::missing("the `x-api-key` header is missing");
        let response = Rejection::MissingKey(&err).default_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            json(&response)["detail"],
            "This request cannot be rate limited: the `x-api-key` header is missing."
        );
        let err = StoreError::Timeout(Duration::from_millis(100));
        assert_eq!(
            Rejection::Unavailable(&err).default_response().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn a_shed_request_is_told_its_priority_and_when_to_retry() {
        let shedding = Shedding::new(Priority::Low, 0.25, 1.0, Duration::from_millis(4_100));
        let response = Rejection::Shed(&shedding).default_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = json(&response);
        assert_eq!(body["status"], 503);
        assert_eq!(body["priority"], "low");
        assert_eq!(body["retry_after"], 5);
        assert_eq!(
            body["detail"],
            "The service is overloaded and refuses 25% of low priority requests to recover. \
             Retry after 5 seconds."
        );
    }
}
