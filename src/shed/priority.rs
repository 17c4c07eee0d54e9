//! How important a request is to the business, and the classifier that decides it.
//!
//! Load shedders refuse the least important traffic first and [`Priority::Critical`] last: the
//! utilisation shedder never refuses it, the fleet shedder only once the whole fleet capacity is
//! in use (a hard bound: admitting more would overload the fleet it protects).
//! The priority is decided once per request from its head, by the shedder's `classify` closure,
//! and put into the request extensions so that later layers and the handler see the same answer.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use http::request::Parts;
use serde::{Deserialize, Serialize};

/// How important a request is. Ordered: `Low < Normal < High < Critical`.
///
/// Stripe's four classes of traffic map onto them as: critical methods (creating charges, moving
/// money) → `Critical`; other writes (`POST`) → `High`; reads (`GET`) → `Normal`; test-mode
/// traffic, analytics and reporting → `Low`.
///
/// A shedder's `classify` closure decides it from the request head:
///
/// ```
/// use http::{Method, request::Parts};
/// use tower_redis_ratelimit::shed::Priority;
///
/// // Stripe's split: money movement is critical, other writes high, reads normal.
/// let classify = |parts: &Parts| {
///     if parts.uri.path().starts_with("/v1/charges") {
///         Priority::Critical
///     } else if parts.method == Method::GET {
///         Priority::Normal
///     } else {
///         Priority::High
///     }
/// };
/// let (parts, ()) = http::Request::post("/v1/charges").body(()).unwrap().into_parts();
/// assert_eq!(classify(&parts), Priority::Critical);
/// ```
///
/// Never take a priority from a header the client controls: every client would claim `Critical`.
/// Derive it from the route, the method, or what an authentication layer put into the
/// extensions.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Best effort: the first traffic to go when the service is overloaded.
    Low,
    /// Ordinary traffic (the default when no classifier is given).
    #[default]
    Normal,
    /// Important traffic, shed only after `Low` and `Normal`.
    High,
    /// Traffic the business depends on: never refused by the utilisation shedder, and refused by
    /// the fleet shedder only when the whole fleet capacity is in use. Keep it to a small share of
    /// the capacity, or shedding cannot protect the service.
    Critical,
}

impl Priority {
    /// Every priority, lowest first.
    pub const ALL: [Priority; 4] = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Critical,
    ];

    /// The priorities the utilisation shedder's control law may refuse, lowest first.
    pub const SHEDDABLE: [Priority; 3] = [Priority::Low, Priority::Normal, Priority::High];

    /// The lowercase name: `low`, `normal`, `high` or `critical`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    /// Whether the utilisation shedder may refuse requests of this priority (all but `Critical`;
    /// the fleet shedder refuses even `Critical` when the fleet is full).
    pub const fn is_sheddable(self) -> bool {
        !matches!(self, Priority::Critical)
    }

    /// A small dense index, `Low` = 0 to `Critical` = 3, for per-priority tables.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Priority`] from text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown priority {0:?}: use one of \"low\", \"normal\", \"high\", \"critical\"")]
pub struct ParsePriorityError(String);

impl FromStr for Priority {
    type Err = ParsePriorityError;

    /// Parses `low`, `normal`, `high` or `critical`, ignoring ASCII case.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Priority::ALL
            .into_iter()
            .find(|priority| priority.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| ParsePriorityError(text.to_owned()))
    }
}

/// Decides a request's [`Priority`] from its head: the shedders' `classify` closures.
pub(crate) type Classifier = Arc<dyn Fn(&Parts) -> Priority + Send + Sync>;

/// The priority of a request: the one an earlier layer already put into its extensions, or the
/// classifier's (which is then recorded there), so that one request has one priority however
/// many shedders it passes.
pub(crate) fn priority_of(
    parts: &mut Parts,
    classify: &(dyn Fn(&Parts) -> Priority + Send + Sync),
) -> Priority {
    if let Some(priority) = parts.extensions.get::<Priority>() {
        return *priority;
    }
    let priority = classify(parts);
    parts.extensions.insert(priority);
    priority
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, path: &str) -> Parts {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    #[test]
    fn priorities_are_ordered_from_low_to_critical() {
        assert!(Priority::Low < Priority::Normal);
        assert!(Priority::Normal < Priority::High);
        assert!(Priority::High < Priority::Critical);
        assert_eq!(Priority::default(), Priority::Normal);
        assert!(Priority::SHEDDABLE.iter().all(|p| p.is_sheddable()));
        assert!(!Priority::Critical.is_sheddable());
        let indexes: Vec<usize> = Priority::ALL.iter().map(|p| p.index()).collect();
        assert_eq!(indexes, [0, 1, 2, 3]);
    }

    #[test]
    fn priorities_parse_and_print_their_names() {
        for priority in Priority::ALL {
            assert_eq!(priority.to_string().parse::<Priority>(), Ok(priority));
        }
        assert_eq!("CRITICAL".parse::<Priority>(), Ok(Priority::Critical));
        let err = "urgent".parse::<Priority>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown priority \"urgent\": use one of \"low\", \"normal\", \"high\", \"critical\""
        );
        assert_eq!(serde_json::to_string(&Priority::High).unwrap(), "\"high\"");
    }

    #[test]
    fn a_request_keeps_the_priority_it_was_first_given() {
        let by_method = |parts: &Parts| {
            if parts.method == http::Method::GET {
                Priority::Normal
            } else {
                Priority::High
            }
        };
        let mut get = parts("GET", "/");
        assert_eq!(priority_of(&mut get, &by_method), Priority::Normal);
        assert_eq!(get.extensions.get::<Priority>(), Some(&Priority::Normal));
        // A second shedder with another classifier sees the first one's answer.
        assert_eq!(
            priority_of(&mut get, &|_: &Parts| Priority::Critical),
            Priority::Normal
        );
        let mut post = parts("POST", "/");
        assert_eq!(priority_of(&mut post, &by_method), Priority::High);
    }
}
