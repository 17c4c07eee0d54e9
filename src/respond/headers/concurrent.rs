//! The headers of a concurrency decision, as the [headers reference](crate::guide::headers)
//! says: the policy is `"name";q=N;qu="concurrent-requests"` and `r` the free slots. There is no
//! window, so no reset time: a slot frees when a request ends. `Retry-After` on a refusal is the
//! layer's hint.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use sfv::{KeyRef, ListSerializer};

use super::HeaderFamilies;
use super::format::{
    epoch_seconds, fill, header_value, retry_after, sf_integer, sf_name, whole_seconds,
};
use super::integer::integer;
use super::names::{
    EXPIRES_AT, RATELIMIT, RATELIMIT_POLICY, STATE, TOTAL_REQUESTS, X_LIMIT, X_REMAINING, X_USED,
};
use super::quota_policy::concurrency_policy;
use super::rfc3339::rfc3339;

/// What one concurrency decision tells the client: the limit `name` admits `limit` requests at
/// once, the request was `admitted` or not, and `in_flight` are in flight (this one included
/// when admitted). Plain values, not the store's answer: what a client is told knows no store.
#[derive(Clone, Debug)]
pub(crate) struct Concurrent {
    pub(crate) name: Arc<str>,
    pub(crate) limit: u32,
    pub(crate) admitted: bool,
    pub(crate) in_flight: u64,
    pub(crate) retry_after: Duration,
}

impl Concurrent {
    pub(crate) fn apply(&self, headers: &mut HeaderMap, families: HeaderFamilies) {
        let (admitted, in_flight) = (self.admitted, self.in_flight);
        let free = u64::from(self.limit).saturating_sub(in_flight);
        if families.contains(HeaderFamilies::RATE_LIMITING) {
            let state = if admitted { "Allow" } else { "Deny" };
            fill(headers, TOTAL_REQUESTS, integer(in_flight));
            fill(headers, STATE, HeaderValue::from_static(state));
            if !admitted {
                let retry_at = SystemTime::now() + whole_seconds(self.retry_after);
                fill(headers, EXPIRES_AT, rfc3339(epoch_seconds(retry_at)));
            }
        }
        if families.contains(HeaderFamilies::IETF) {
            headers.append(RATELIMIT_POLICY, concurrency_policy(&self.name, self.limit));
            let mut line = ListSerializer::new();
            line.bare_item(sf_name(&self.name))
                .parameter(KeyRef::constant("r"), sf_integer(free));
            headers.append(RATELIMIT, header_value(line.finish().unwrap_or_default()));
        }
        if families.contains(HeaderFamilies::X_RATELIMIT) {
            fill(headers, X_LIMIT, integer(u64::from(self.limit)));
            fill(headers, X_REMAINING, integer(free));
            fill(headers, X_USED, integer(in_flight));
        }
        if !admitted {
            retry_after(headers, self.retry_after);
        }
    }
}

#[cfg(test)]
mod tests {
    use http::header::RETRY_AFTER;

    use super::*;

    fn report(admitted: bool) -> Concurrent {
        Concurrent {
            name: "ws".into(),
            limit: 3,
            admitted,
            in_flight: if admitted { 2 } else { 3 },
            retry_after: Duration::from_millis(1_500),
        }
    }

    #[test]
    fn an_admitted_request_reports_the_free_slots() {
        let mut headers = HeaderMap::new();
        report(true).apply(&mut headers, HeaderFamilies::ALL);
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
        report(false).apply(&mut headers, HeaderFamilies::DEFAULT);
        assert_eq!(headers[&RATELIMIT], r#""ws";r=0"#);
        assert_eq!(headers[&STATE], "Deny");
        assert_eq!(headers[RETRY_AFTER], "2");
        assert!(headers.get(&EXPIRES_AT).is_some());
        assert!(headers.get(&X_LIMIT).is_none());
    }
}
