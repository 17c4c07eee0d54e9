//! [`Admit`]: what a middleware decides, as the admission core asks it.

use std::time::Duration;

use http::request::Parts;
use http::{Extensions, HeaderValue};

use crate::key::Key;
use crate::respond::Report;
use crate::store::{StoreError, StoreFuture};

/// Keeps [`Admit`] to this crate: its shape may change with any release.
mod sealed {
    /// Implemented by this crate's middlewares only.
    pub trait Sealed {}
}

pub(crate) use self::sealed::Sealed;

/// A middleware's answer to "may this request pass?", driven by the admission core
/// ([`Admission`](super::Admission)): a rate limit, a concurrency limit and each load shedder is
/// one implementation. Sealed: it names the middlewares of this crate in the types of the
/// layer, the service, its future and its body, and cannot be implemented elsewhere.
///
/// The core extracts the key, bounds the store call with the layer's deadline, applies the
/// failure mode, answers refusals and writes the headers; an implementation only starts its check
/// and turns the answer into a [`Verdict`].
// Hidden from the docs: no user implements it (sealed) nor names it (the layers' aliases do).
#[doc(hidden)]
pub trait Admit: Sealed + Send + Sync + 'static {
    /// The store's answer.
    type Answer: Send + 'static;
    /// What a check carries until its answer: e.g. the request's cost, or a concurrency ticket
    /// that gives back a permit no one will hold.
    type Pending: Send + 'static;
    /// What an admitted request holds until its response body is finished (a concurrency permit,
    /// a place in the in-flight count).
    type Held: Send + Sync + 'static;
    /// Why a request was refused, as the layer's `on_rejection` hook receives it.
    type Rejection: Send + Sync + 'static;

    /// What failures are logged as (`"rate limiting"`, `"concurrency limiting"`).
    const LIMITING: &'static str;

    /// Starts the check of a request with its key (the empty key for a middleware that keys
    /// nothing): the store's answer (ready at once for an in-process store) and what deciding
    /// on it needs.
    fn check(&self, key: Key, parts: &mut Parts) -> (StoreFuture<Self::Answer>, Self::Pending);

    /// The verdict on the store's answer. May put what the handler should see (a decision, a
    /// permit) into the request's `extensions`.
    fn decide(
        &self,
        answer: Self::Answer,
        pending: Self::Pending,
        extensions: &mut Extensions,
    ) -> Verdict<Self>;

    /// The store failed for a check: lets go of what it carried, and answers the static
    /// `RateLimit-Policy` to announce on a response without a decision.
    fn failed(&self, pending: Self::Pending, error: &StoreError) -> Option<HeaderValue>;

    /// Whether a failed check must be refused whatever the layer's failure mode: a global
    /// policy's (`store::region`), whose worldwide bound a request let through unchecked would
    /// break.
    #[inline]
    fn fails_closed(&self, _pending: &Self::Pending) -> bool {
        false
    }

    /// The static `RateLimit-Policy` of a request refused before its check (no key).
    fn announced(&self) -> Option<HeaderValue>;

    /// The names of the limits, for logs.
    fn names(&self) -> Vec<&str>;

    /// Whether the middleware is in shadow mode now: it refuses nothing, and tells nothing of a
    /// request it would have refused before its check (no key, a denied key) or after a failed
    /// store call. Only a rate limit has a shadow mode.
    #[inline]
    fn shadowed(&self) -> bool {
        false
    }
}

/// What an [`Admit`] decided about one request: whether it passes, and what to tell the client.
pub struct Verdict<A: Admit + ?Sized> {
    /// What the response's headers report.
    pub(crate) report: Option<Report>,
    pub(crate) ruling: Ruling<A::Held, A::Rejection>,
    /// How long an admitted request waits before the service is called (a rate limit's rule with
    /// a `max_delay` queued it); zero otherwise.
    pub(crate) delay: Duration,
}

/// Pass, holding something until the response is finished, or be refused.
pub(crate) enum Ruling<H, R> {
    Pass(Option<H>),
    Refuse(R),
}

impl<A: Admit + ?Sized> Verdict<A> {
    /// The request passes, holding `held` until its response is finished.
    pub(crate) fn pass(report: Option<Report>, held: Option<A::Held>) -> Self {
        Self {
            report,
            ruling: Ruling::Pass(held),
            delay: Duration::ZERO,
        }
    }

    /// The request passes once it has waited `delay`, holding `held` until its response is
    /// finished.
    pub(crate) fn pass_after(
        delay: Duration,
        report: Option<Report>,
        held: Option<A::Held>,
    ) -> Self {
        Self {
            delay,
            ..Self::pass(report, held)
        }
    }

    /// The request is refused.
    pub(crate) fn refuse(report: Option<Report>, rejection: A::Rejection) -> Self {
        Self {
            report,
            ruling: Ruling::Refuse(rejection),
            delay: Duration::ZERO,
        }
    }
}
