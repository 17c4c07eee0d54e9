//! [`Core`]: the configuration every layer shares, and the steps that are the same for every
//! middleware: the key, the failure mode, what to tell the client (written by
//! [`respond`](crate::respond)), the throttled warnings.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};

use super::admit::{Admit, Ruling, Verdict};
use super::failure::FailureMode;
use super::keys::{Keys, NoKey};
use crate::key::Key;
use crate::log::Throttled;
use crate::respond::{HeaderFamilies, Report, Responder, Stamp, Undecided};
use crate::store::StoreError;

/// What the layer does when its store fails.
pub(crate) struct OnFailure<R> {
    /// Whether the layer fails closed (else open, unless a check must fail closed).
    closed: bool,
    /// The refusal of a request whose check failed closed; none for a middleware that asks no
    /// store, and so never fails.
    unavailable: Option<fn(StoreError) -> R>,
}

impl<R> OnFailure<R> {
    /// The failure mode `mode`, refusing with `unavailable` when it fails closed.
    pub(crate) fn new(mode: FailureMode, unavailable: Option<fn(StoreError) -> R>) -> Self {
        OnFailure {
            closed: mode == FailureMode::Closed,
            unavailable,
        }
    }

    /// The refusal of a failed check, or `None` to let it pass: a check that must fail closed
    /// (`forced`, a global policy's) is refused whatever the mode.
    fn refusal(&self, forced: bool) -> Option<fn(StoreError) -> R> {
        self.unavailable.filter(|_| self.closed || forced)
    }
}

/// The configuration shared by a layer and every service it makes.
pub(crate) struct Core<A: Admit> {
    pub(crate) admit: A,
    /// Where requests get their keys; none for a middleware that counts every request alike
    /// (the load shedders), whose checks get the empty key.
    pub(crate) keys: Option<Keys<A::Rejection>>,
    pub(crate) on_failure: OnFailure<A::Rejection>,
    pub(crate) deadline: Duration,
    pub(crate) families: HeaderFamilies,
    pub(crate) responder: Responder<A::Rejection>,
    pub(crate) failures: Throttled,
}

/// What to do with a request before its check.
pub(crate) enum Keyed {
    /// Check it, with this key.
    Check(Key),
    /// Let it pass unlimited (no key, and the layer skips such requests).
    Unlimited,
    /// Answer it with this response.
    Refused(Response<Bytes>),
}

/// What to do with a request once its check is decided. The request itself stays with the
/// caller: carrying it here moved its 200-odd bytes in and out once more per request.
pub(crate) enum Next<H> {
    /// Call the service, then stamp its response; the body holds `held` until it is finished.
    Pass(Option<Stamp>, Option<H>),
    /// Wait this long first (a rate limit queued the request), then as `Pass`.
    Wait(Duration, Option<Stamp>, Option<H>),
    /// Answer with this response (already stamped) instead.
    Reject(Response<Bytes>),
}

impl<A: Admit> Core<A> {
    /// The span of one decision, at debug level: the store's work and the decision are logged in
    /// it. Below debug it is none, at the cost of one level check: `debug_span!` alone costs more
    /// when its callsite is off, since with `tracing`'s `log` feature (which axum turns on) it
    /// then asks `log` too.
    #[inline]
    pub(crate) fn span(&self) -> tracing::Span {
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            tracing::debug_span!(
                "admission",
                limiting = A::LIMITING,
                policy = ?self.admit.names(),
                // A rate limit records the plan whose policy decides, when it is not the default.
                plan = tracing::field::Empty
            )
        } else {
            tracing::Span::none()
        }
    }

    /// The request's key, or what to do without one.
    #[inline]
    pub(crate) fn key(&self, parts: &Parts) -> Keyed {
        let Some(keys) = &self.keys else {
            return Keyed::Check(Key::from_static(""));
        };
        match keys.key(parts) {
            Ok(key) => Keyed::Check(key),
            Err(NoKey::Skip) => Keyed::Unlimited,
            Err(NoKey::Refuse(_)) if self.admit.shadowed() => {
                tracing::debug!(
                    policy = ?self.admit.names(),
                    "shadow mode: a request this limit refuses before its check (no usable key, \
                     or a denied one) passes"
                );
                Keyed::Unlimited
            }
            Err(NoKey::Refuse(rejection)) => {
                let report = Report::undecided(Undecided::MissingKey, self.admit.announced());
                let stamp = Some(self.stamp(report));
                Keyed::Refused(self.responder.refuse(&rejection, stamp, &parts.headers))
            }
        }
    }

    /// Turns the store's answer about `request` into the next step.
    #[inline]
    pub(crate) fn settle<B>(
        &self,
        result: Result<A::Answer, StoreError>,
        pending: A::Pending,
        request: &mut Request<B>,
    ) -> Next<A::Held> {
        match result {
            Ok(answer) => {
                let verdict = self.admit.decide(answer, pending, request.extensions_mut());
                self.follow(verdict, request)
            }
            Err(err) => {
                crate::telemetry::store_error(A::LIMITING, err.kind().as_str());
                if tracing::level_enabled!(tracing::Level::DEBUG) {
                    tracing::debug!(error = %err, "the store failed");
                }
                let refusal = self.on_failure.refusal(self.admit.fails_closed(&pending));
                let policy = self.admit.failed(pending, &err);
                if self.admit.shadowed() {
                    // Whatever the failure mode: a limit in shadow mode refuses nothing, and a
                    // `Skipped` would tell of a limit the client is not under.
                    self.warn(&err, false);
                    return Next::Pass(None, None);
                }
                match refusal {
                    None => {
                        self.warn(&err, false);
                        let report = Report::undecided(Undecided::Skipped, policy);
                        Next::Pass(Some(self.stamp(report)), None)
                    }
                    Some(unavailable) => {
                        self.warn(&err, true);
                        let stamp =
                            Some(self.stamp(Report::undecided(Undecided::Unavailable, policy)));
                        let rejection = unavailable(err);
                        Next::Reject(self.responder.refuse(&rejection, stamp, request.headers()))
                    }
                }
            }
        }
    }

    /// Carries out a verdict on `request`.
    #[inline]
    pub(crate) fn follow<B>(&self, verdict: Verdict<A>, request: &Request<B>) -> Next<A::Held> {
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            let admitted = matches!(verdict.ruling, Ruling::Pass(_));
            tracing::debug!(admitted, "decided");
        }
        let Verdict {
            report,
            ruling,
            delay,
        } = verdict;
        match ruling {
            Ruling::Pass(held) if !delay.is_zero() => {
                Next::Wait(delay, report.map(|report| self.stamp(report)), held)
            }
            Ruling::Pass(held) => Next::Pass(report.map(|report| self.stamp(report)), held),
            Ruling::Refuse(rejection) => {
                let stamp = report.map(|report| self.stamp(report));
                Next::Reject(self.responder.refuse(&rejection, stamp, request.headers()))
            }
        }
    }

    #[inline]
    fn stamp(&self, report: Report) -> Stamp {
        Stamp::new(self.families, report)
    }

    /// Logs a store failure, at most once per second per layer: during an outage every request
    /// fails the same way.
    fn warn(&self, err: &StoreError, refused: bool) {
        self.failures.warn(|suppressed| {
            let policy = self.admit.names();
            if refused {
                tracing::warn!(
                    error = %err,
                    suppressed,
                    ?policy,
                    "request refused: the store failed and the layer fails closed (or its policy \
                     is global)"
                );
            } else {
                tracing::warn!(
                    error = %err,
                    suppressed,
                    ?policy,
                    "{} skipped: the store failed and the layer fails open",
                    A::LIMITING
                );
            }
        });
    }
}

impl<A: Admit + fmt::Debug> fmt::Debug for Core<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let missing_key = self.keys.as_ref().map(|keys| keys.missing);
        let fails_closed = self.on_failure.closed && self.on_failure.unavailable.is_some();
        f.debug_struct("Core")
            .field("admit", &self.admit)
            .field("missing_key", &missing_key)
            .field("fails_closed", &fails_closed)
            .field("deadline", &self.deadline)
            .field("headers", &self.families)
            .finish_non_exhaustive()
    }
}
