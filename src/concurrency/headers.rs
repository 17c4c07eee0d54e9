//! The headers of a concurrency decision.
//!
//! | family | allowed | refused |
//! |---|---|---|
//! | `Rate-Limiting-*` | `Total-Requests` (in flight, this one included), `State: Allow` | `Total-Requests`, `State: Deny`, `Expires-At` (when to retry) |
//! | IETF | `RateLimit-Policy: "name";q=N;qu="concurrent-requests"`, `RateLimit: "name";r=<free>` | the same |
//! | `X-RateLimit-*` | `Limit`, `Remaining`, `Used` | the same |
//!
//! There is no window, so no reset time: a slot frees when a request ends. `Retry-After` on a
//! refusal is the layer's hint.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use sfv::{KeyRef, ListSerializer, StringRef};

use crate::headers::{
    EXPIRES_AT, Headers, RATELIMIT, RATELIMIT_POLICY, STATE, TOTAL_REQUESTS, X_LIMIT, X_REMAINING,
    X_USED, fill, header_value, retry_after, rfc3339, sf_integer, whole_seconds,
};

/// What the headers of one concurrency decision say.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub(crate) name: Arc<str>,
    pub(crate) limit: u32,
    pub(crate) in_flight: u64,
    pub(crate) admitted: bool,
    pub(crate) retry_after: Duration,
}

impl InFlight {
    pub(crate) fn apply(&self, headers: &mut HeaderMap, families: Headers) {
        let free = u64::from(self.limit).saturating_sub(self.in_flight);
        if families.contains(Headers::RATE_LIMITING) {
            let state = if self.admitted { "Allow" } else { "Deny" };
            fill(headers, TOTAL_REQUESTS, self.in_flight.into());
            fill(headers, STATE, http::HeaderValue::from_static(state));
            if !self.admitted {
                let retry_at = SystemTime::now() + whole_seconds(self.retry_after);
                fill(headers, EXPIRES_AT, rfc3339(retry_at));
            }
        }
        if families.contains(Headers::IETF) {
            headers.append(RATELIMIT_POLICY, policy_header(&self.name, self.limit));
            let name = sf_name(&self.name);
            let mut limit = ListSerializer::new();
            limit
                .bare_item(name)
                .parameter(KeyRef::constant("r"), sf_integer(free));
            headers.append(RATELIMIT, header_value(limit.finish().unwrap_or_default()));
        }
        if families.contains(Headers::X_RATELIMIT) {
            fill(headers, X_LIMIT, self.limit.into());
            fill(headers, X_REMAINING, free.into());
            fill(headers, X_USED, self.in_flight.into());
        }
        if !self.admitted {
            retry_after(headers, self.retry_after);
        }
    }
}

/// `RateLimit-Policy` of a concurrency limit: `"name";q=<limit>;qu="concurrent-requests"`. Static
/// for a given limit, so also sent on responses without a decision.
pub(crate) fn policy_header(name: &str, limit: u32) -> HeaderValue {
    let mut policy = ListSerializer::new();
    policy
        .bare_item(sf_name(name))
        .parameter(KeyRef::constant("q"), sf_integer(u64::from(limit)))
        .parameter(
            KeyRef::constant("qu"),
            StringRef::constant("concurrent-requests"),
        );
    header_value(policy.finish().unwrap_or_default())
}

/// The limit's name as a structured-field string.
fn sf_name(name: &str) -> &StringRef {
    // Limit names are validated to a subset of sf-string characters.
    StringRef::from_str(name).unwrap_or(StringRef::constant("invalid"))
}

#[cfg(test)]
mod tests {
    use http::header::RETRY_AFTER;

    use super::*;

    fn stamp(admitted: bool) -> InFlight {
        InFlight {
            name: "ws".into(),
            limit: 3,
            in_flight: if admitted { 2 } else { 3 },
            admitted,
            retry_after: Duration::from_millis(1_500),
        }
    }

    #[test]
    fn an_admitted_request_reports_the_free_slots() {
        let mut headers = HeaderMap::new();
        stamp(true).apply(&mut headers, Headers::ALL);
        assert_eq!(
            headers[&RATELIMIT_POLICY],
            r#""ws";q=3;qu="concurrent-requests""#
        );
        assert_eq!(headers[&RATELIMIT], r#""ws";r=1"#);
        assert_eq!(headers[&TOTAL_REQUESTS], "2");
        assert_eq!(headers[&STATE], "Allow");
        assert_eq!(headers[&X_REMAINING], "1");
        assert!(headers.get(RETRY_AFTER).is_none());
        assert!(headers.get(&EXPIRES_AT).is_none());
    }

    #[test]
    fn a_refusal_says_when_to_retry_rounded_up() {
        let mut headers = HeaderMap::new();
        stamp(false).apply(&mut headers, Headers::DEFAULT);
        assert_eq!(headers[&RATELIMIT], r#""ws";r=0"#);
        assert_eq!(headers[&STATE], "Deny");
        assert_eq!(headers[RETRY_AFTER], "2");
        assert!(headers.get(&EXPIRES_AT).is_some());
        assert!(headers.get(&X_LIMIT).is_none());
    }
}
