//! What the rate-limit headers of one answer told the client: `RateLimit`, `RateLimit-Policy`,
//! `Retry-After` and `Rate-Limiting-State`, and how long that says to wait.
//!
//! `tests/it/client.rs` runs the example against answers carrying these headers and checks what
//! it prints and how long it waits.

use std::time::Duration;

use reqwest::header::HeaderMap;
use sfv::{BareItem, ListEntry, Parser};

/// What the rate-limit headers of one answer said.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Told {
    /// `RateLimit` (its first policy): what remains, and seconds until more is available.
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
        if let Some(params) = text("ratelimit").and_then(first_item) {
            told.remaining = integer(&params, "r");
            told.reset_secs = integer(&params, "t");
        }
        if let Some(params) = text("ratelimit-policy").and_then(first_item) {
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

/// The parameters of the first member of a structured-field list, which names its policy with a
/// string or a token.
fn first_item(value: &str) -> Option<Vec<(String, BareItem)>> {
    let list: sfv::List = Parser::new(value).parse().ok()?;
    let ListEntry::Item(item) = list.into_iter().next()? else {
        return None;
    };
    if !matches!(item.bare_item, BareItem::String(_) | BareItem::Token(_)) {
        return None;
    }
    let params = item
        .params
        .into_iter()
        .map(|(key, value)| (key.as_str().to_owned(), value))
        .collect();
    Some(params)
}

fn integer(params: &[(String, BareItem)], name: &str) -> Option<u64> {
    params
        .iter()
        .find(|(key, _)| key == name)
        .and_then(|(_, value)| value.as_integer())
        .and_then(|value| u64::try_from(i64::from(value)).ok())
}
