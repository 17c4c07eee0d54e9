//! What the rate-limit headers of one answer told the client: `RateLimit`, `RateLimit-Policy`,
//! `Retry-After` and `Rate-Limiting-State`, and how long that says to wait.
//!
//! Its unit tests run with the integration tests (`tests/it` includes this file), since the
//! example itself is a plain binary that the quickstart tests run.

use std::time::Duration;

use reqwest::header::HeaderMap;
use sfv::{BareItem, ListEntry, Parser};

/// What the rate-limit headers of one answer said.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Told {
    /// `RateLimit`: the policy named, what remains, and seconds until more is available.
    pub(crate) name: Option<String>,
    pub(crate) remaining: Option<u64>,
    pub(crate) reset_secs: Option<u64>,
    /// `RateLimit-Policy`: the quota and its window, in seconds.
    pub(crate) quota: Option<u64>,
    pub(crate) window_secs: Option<u64>,
    /// `Retry-After`, in seconds.
    pub(crate) retry_after_secs: Option<u64>,
    /// `Rate-Limiting-State`.
    pub(crate) state: Option<String>,
}

impl Told {
    pub(crate) fn read(headers: &HeaderMap) -> Self {
        let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
        let mut told = Told {
            retry_after_secs: text("retry-after").and_then(|value| value.trim().parse().ok()),
            state: text("rate-limiting-state").map(str::to_owned),
            ..Told::default()
        };
        if let Some((name, params)) = text("ratelimit").and_then(first_item) {
            told.name = Some(name);
            told.remaining = integer(&params, "r");
            told.reset_secs = integer(&params, "t");
        }
        if let Some((_, params)) = text("ratelimit-policy").and_then(first_item) {
            told.quota = integer(&params, "q");
            told.window_secs = integer(&params, "w");
        }
        told
    }

    /// How long to wait before the next request, as told: `None` when nothing asks for a wait.
    pub(crate) fn wait(&self, refused: bool) -> Option<Duration> {
        let secs = if refused {
            self.retry_after_secs.or(self.reset_secs)?
        } else if self.remaining == Some(0) {
            self.reset_secs?
        } else {
            return None;
        };
        Some(Duration::from_secs(secs))
    }
}

/// The first member of a structured-field list, as a string or token, with its parameters.
fn first_item(value: &str) -> Option<(String, Vec<(String, BareItem)>)> {
    let list: sfv::List = Parser::new(value).parse().ok()?;
    let ListEntry::Item(item) = list.into_iter().next()? else {
        return None;
    };
    let name = match &item.bare_item {
        BareItem::String(name) => name.as_str().to_owned(),
        BareItem::Token(name) => name.as_str().to_owned(),
        _ => return None,
    };
    let params = item
        .params
        .into_iter()
        .map(|(key, value)| (key.as_str().to_owned(), value))
        .collect();
    Some((name, params))
}

fn integer(params: &[(String, BareItem)], name: &str) -> Option<u64> {
    params
        .iter()
        .find(|(key, _)| key == name)
        .and_then(|(_, value)| value.as_integer())
        .and_then(|value| u64::try_from(i64::from(value)).ok())
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    reqwest::header::HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn reads_the_ietf_and_rate_limiting_headers() {
        let told = Told::read(&headers(&[
            ("ratelimit", r#""hello";r=0;t=7"#),
            ("ratelimit-policy", r#""hello";q=5;w=10"#),
            ("rate-limiting-state", "Allow"),
        ]));
        assert_eq!(told.name.as_deref(), Some("hello"));
        assert_eq!((told.remaining, told.reset_secs), (Some(0), Some(7)));
        assert_eq!((told.quota, told.window_secs), (Some(5), Some(10)));
        assert_eq!(told.state.as_deref(), Some("Allow"));
        assert_eq!(told.wait(false), Some(Duration::from_secs(7)));
    }

    #[test]
    fn a_refusal_waits_for_retry_after_and_quota_left_waits_for_nothing() {
        let refused = Told::read(&headers(&[
            ("ratelimit", r#""key";r=0;t=10"#),
            ("retry-after", "4"),
        ]));
        assert_eq!(refused.wait(true), Some(Duration::from_secs(4)));
        let left = Told::read(&headers(&[("ratelimit", r#""key";r=2;t=10"#)]));
        assert_eq!(left.wait(false), None);
        // Malformed headers tell nothing.
        assert_eq!(
            Told::read(&headers(&[("ratelimit", "r=;;")])).wait(false),
            None
        );
    }
}
