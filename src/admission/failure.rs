//! What a layer does when it cannot decide: the store failed, or the request has no key.

/// What to do when the store cannot answer (down, unreachable, slower than the deadline).
///
/// With the `config` feature it deserializes from `"open"` and `"closed"`, as configuration files
/// write it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "config",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum FailureMode {
    /// Let the request pass unlimited (except under a [global policy](crate::Policy::global),
    /// which fails closed whatever the mode: its worldwide bound must hold), tell the client with `Rate-Limiting-State: Skipped` (and
    /// the static `RateLimit-Policy`; no header that needs a decision), and log a warning (at most
    /// one per second per layer, with a count of the others). The default: a rate limiter outage
    /// should not become a service outage. Such a request carries no
    /// [`Decision`](crate::Decision): handlers take it as `Option<Decision>`.
    #[default]
    Open,
    /// Refuse the request with 503, `Retry-After: 1` and the static `RateLimit-Policy`: for limits
    /// that protect something that must never be overrun.
    Closed,
}

/// What to do with a request for which the key extractor finds no key.
///
/// With the `config` feature it deserializes from `"reject"` and `"skip"`, as configuration files
/// write it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "config",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum MissingKey {
    /// Answer 400 with a problem+json body saying what was missing, and the static
    /// `RateLimit-Policy` (the default).
    #[default]
    Reject,
    /// Let the request pass without limiting it (nor rate-limit headers, nor a
    /// [`Decision`](crate::Decision) in its extensions). Only a missing key is skipped: an
    /// [invalid](crate::key::KeyErrorKind::Invalid) one (e.g. a key header sent twice) is still
    /// answered with 400, or a client could escape its limit at will.
    Skip,
}
