//! Counting the requests a service is working on: a guard per admitted request, carried by the
//! response future and then by the response body, so the count drops when the body has been sent
//! or dropped, when the client goes away (the future is dropped), and when the handler panics
//! (unwinding drops the future).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The number of requests in flight, shared by every service of one layer.
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// How many requests are in flight now.
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one more request until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self.0.clone())
    }
}

/// One request counted as in flight by a [`UtilizationShedLayer`](crate::UtilizationShedLayer),
/// held by its response body ([`ResponseBody`](crate::admission::ResponseBody)). Dropping it is
/// the only way to stop counting the request, so no path forgets to.
#[derive(Debug)]
pub struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_counts_until_its_guard_drops() {
        let in_flight = InFlight::default();
        let first = in_flight.enter();
        let second = in_flight.clone().enter();
        assert_eq!(in_flight.count(), 2, "clones share one count");
        drop(first);
        assert_eq!(in_flight.count(), 1);
        drop(second);
        assert_eq!(in_flight.count(), 0);
    }
}
