//! [`UtilizationShedder`]: one instance's utilisation, the control law, and the decision for each
//! request, as a limiter over the admission core.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::request::Parts;
use http::{Extensions, HeaderValue};
use tokio::time::Instant;

use super::UtilizationShedLayer;
use super::in_flight::{InFlight, InFlightGuard};
use crate::admission::{Admit, Sealed, Verdict};
use crate::key::Key;
use crate::log::Throttled;
use crate::respond::Report;
use crate::shed::priority::{Classifier, Priority, priority_of};
use crate::shed::{ShedControl, UtilizationShedRejection};
use crate::store::{StoreError, StoreFuture};
use crate::sync::lock;

pub(super) type UtilizationFn = dyn Fn() -> f64 + Send + Sync;
pub(super) type RandomFn = dyn Fn() -> f64 + Send + Sync;

/// The decisions of a [`UtilizationShedLayer`]: this instance's utilisation fed to the control
/// law, and each request shed with its priority's drop probability. Made by its builder; the
/// layer's type names it.
pub struct UtilizationShedder {
    pub(super) source: Source,
    pub(super) classify: Classifier,
    pub(super) control: Mutex<ShedControl>,
    pub(super) in_flight: InFlight,
    pub(super) retry_after: Duration,
    pub(super) random: Arc<RandomFn>,
    pub(super) shed_log: Throttled,
}

/// How utilisation is measured.
pub(super) enum Source {
    /// Requests in flight over this capacity.
    Capacity(usize),
    /// The user's measure.
    Function(Arc<UtilizationFn>),
}

/// What becomes of one request.
pub enum ShedAnswer {
    /// Call the service; the request counts as in flight until the guard drops.
    Admitted(InFlightGuard),
    /// Refuse it.
    Shed(UtilizationShedRejection),
}

impl UtilizationShedder {
    /// Admits the request, counted in flight until the guard drops, or sheds it.
    fn admit(&self, parts: &mut Parts) -> ShedAnswer {
        let priority = priority_of(parts, &*self.classify);
        let utilization = match &self.source {
            // Measured before this request counts: at capacity means `capacity` others in flight.
            Source::Capacity(capacity) => self.in_flight.count() as f64 / *capacity as f64,
            Source::Function(function) => function(),
        };
        let drop_probability = {
            // Every request moves the control, critical ones too: the law integrates utilisation
            // over time, whoever happens to sample it.
            let mut control = self.control();
            control.update(Instant::now(), utilization);
            control.drop_probability(priority)
        };
        // Draw only when there is a chance to drop: no random number on the common path.
        if drop_probability > 0.0 && (self.random)() < drop_probability {
            return ShedAnswer::Shed(UtilizationShedRejection::new(
                priority,
                drop_probability,
                utilization,
                self.retry_after,
            ));
        }
        ShedAnswer::Admitted(self.in_flight.enter())
    }

    /// The control state.
    fn control(&self) -> MutexGuard<'_, ShedControl> {
        lock(&self.control)
    }
}

impl Sealed for UtilizationShedder {}

impl Admit for UtilizationShedder {
    type Answer = ShedAnswer;
    type Pending = ();
    type Held = InFlightGuard;
    type Rejection = UtilizationShedRejection;

    const LIMITING: &'static str = "load shedding";

    /// Decided at once: the shedder needs no I/O.
    fn check(&self, _: Key, parts: &mut Parts) -> (StoreFuture<ShedAnswer>, ()) {
        (StoreFuture::ready(Ok(self.admit(parts))), ())
    }

    fn decide(&self, answer: ShedAnswer, (): (), _: &mut Extensions) -> Verdict<Self> {
        match answer {
            ShedAnswer::Admitted(guard) => Verdict::pass(None, Some(guard)),
            ShedAnswer::Shed(shedding) => {
                crate::telemetry::shed("utilization", shedding.priority().as_str());
                self.shed_log.warn(|suppressed| {
                    tracing::warn!(
                        priority = %shedding.priority(),
                        drop_probability = shedding.drop_probability(),
                        utilization = shedding.utilization(),
                        suppressed,
                        "request shed: the instance has been overloaded for a while"
                    );
                });
                Verdict::refuse(Some(Report::RetryAfter(self.retry_after)), shedding)
            }
        }
    }

    /// Never called: the shedder's answers are never errors.
    fn failed(&self, (): (), _: &StoreError) -> Option<HeaderValue> {
        None
    }

    fn announced(&self) -> Option<HeaderValue> {
        None
    }

    fn names(&self) -> Vec<&str> {
        vec!["utilization"]
    }
}

impl UtilizationShedLayer {
    /// How many requests are in flight through this layer: admitted and not yet answered in full
    /// (the response body not sent or dropped yet).
    pub fn in_flight(&self) -> usize {
        self.core.admit.in_flight.count()
    }

    /// The shedding amount as of the last request: negative while healthy, 0 where shedding
    /// starts, 1 when every sheddable request is refused. For metrics and alerts.
    pub fn shedding_amount(&self) -> f64 {
        self.core.admit.control().amount()
    }

    /// The probability that a request of `priority` is shed, as of the last request.
    pub fn drop_probability(&self, priority: Priority) -> f64 {
        self.core.admit.control().drop_probability(priority)
    }
}

impl fmt::Debug for UtilizationShedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Capacity(capacity) => format!("capacity {capacity}"),
            Source::Function(_) => "a utilization function".to_owned(),
        };
        f.debug_struct("UtilizationShedder")
            .field("utilization", &source)
            .field("in_flight", &self.in_flight.count())
            .field("control", &*self.control())
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}
