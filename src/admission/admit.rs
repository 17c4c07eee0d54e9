//! [`Admit`]: what a middleware decides, as the admission core asks it.

use http::request::Parts;
use http::{Extensions, HeaderValue};

use super::keys::KeySource;
use crate::headers::Report;
use crate::store::{StoreError, StoreFuture};

/// A middleware's answer to "may this request pass?", driven by the admission core
/// ([`Admission`](super::Admission)): rate limits, concurrency limits and load shedders are each
/// one implementation.
///
/// The core extracts the key, bounds the store call with the layer's deadline, applies the
/// failure mode, answers refusals and writes the headers; an implementation only starts its check
/// and turns the answer into a [`Verdict`].
// Public so that the public service, future and body types can name it in their bounds, and
// unreachable from outside the crate, so that no one else implements it: its shape may change.
#[allow(unreachable_pub)]
pub trait Admit: Send + Sync + 'static {
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
    /// Where requests get their keys.
    type Keys: KeySource<Self::Rejection, Key = Self::Key>;
    /// What a check is keyed by: a [`Key`](crate::key::Key), or nothing.
    type Key;

    /// What failures are logged as (`"rate limiting"`, `"concurrency limiting"`).
    const LIMITING: &'static str;

    /// Starts the check of a request with its key: the store's answer (ready at once for an
    /// in-process store) and what deciding on it needs.
    fn check(
        &self,
        key: Self::Key,
        parts: &mut Parts,
    ) -> (StoreFuture<Self::Answer>, Self::Pending);

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

    /// The static `RateLimit-Policy` of a request refused because it had no key.
    fn announced(&self) -> Option<HeaderValue>;

    /// The names of the limits, for logs.
    fn names(&self) -> Vec<&str>;
}

/// What an [`Admit`] decided about one request: what to tell the client, and whether it passes.
#[allow(unreachable_pub)]
pub struct Verdict<A: Admit + ?Sized> {
    pub(crate) report: Option<Report>,
    pub(crate) outcome: Outcome<A::Held, A::Rejection>,
}

/// Pass, holding something until the response is finished, or be refused.
pub(crate) enum Outcome<H, R> {
    Pass(Option<H>),
    Refuse(R),
}

impl<A: Admit + ?Sized> Verdict<A> {
    /// The request passes, holding `held` until its response is finished.
    pub(crate) fn pass(report: Option<Report>, held: Option<A::Held>) -> Self {
        Self {
            report,
            outcome: Outcome::Pass(held),
        }
    }

    /// The request is refused.
    pub(crate) fn refuse(report: Option<Report>, rejection: A::Rejection) -> Self {
        Self {
            report,
            outcome: Outcome::Refuse(rejection),
        }
    }
}
