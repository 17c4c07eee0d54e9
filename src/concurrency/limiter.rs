//! [`ConcurrencyLimiter`]: a concurrency limit as a limiter over the admission core.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{Extensions, HeaderValue};

use super::busy::Busy;
use super::permit::{self, ConcurrencyPermit};
use super::slot_limit::SlotLimit;
use crate::admission::{Admit, Sealed, Verdict};
use crate::key::Key;
use crate::respond::{Concurrent, Report, concurrency_policy};
use crate::store::permits::{Acquired, PermitId, PermitStore, PermitTtl, Slot};
use crate::store::{StoreError, StoreFuture};

/// The decisions of a concurrency limit: a permit from the request's slot, held in a store
/// shared by every server, held until the response is finished. How many permits a request may
/// share is `L`'s to say: [`PerKey`](super::PerKey) for a
/// [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer), the fleet's shares by priority for a
/// [`FleetShedLayer`](crate::FleetShedLayer). Made by the layers' builders; their types name it.
pub struct ConcurrencyLimiter<L> {
    pub(crate) name: Arc<str>,
    pub(crate) store: Arc<dyn PermitStore>,
    pub(crate) limits: L,
    pub(crate) ttl: PermitTtl,
    pub(crate) retry_after: Duration,
}

/// An acquisition on its way: given back if its answer never comes (cancelled, timed out), since
/// the store may have admitted it all the same.
pub struct Ticket<C> {
    store: Arc<dyn PermitStore>,
    pending: Option<(Slot, PermitId)>,
    limit: u32,
    class: C,
}

impl<C> Drop for Ticket<C> {
    fn drop(&mut self) {
        if let Some((slot, id)) = self.pending.take() {
            permit::release(&self.store, &slot, id);
        }
    }
}

impl<L: SlotLimit> Sealed for ConcurrencyLimiter<L> {}

impl<L: SlotLimit> Admit for ConcurrencyLimiter<L> {
    type Answer = Acquired;
    type Pending = Ticket<L::Class>;
    type Held = ConcurrencyPermit;
    type Rejection = L::Rejection;

    const LIMITING: &'static str = "concurrency limiting";

    fn check(&self, key: Key, parts: &mut Parts) -> (StoreFuture<Acquired>, Ticket<L::Class>) {
        let class = self.limits.classify(parts);
        let limit = self.limits.limit(class);
        let slot = Slot::valid(self.name.clone(), self.limits.slot_key(key));
        let id = PermitId::next();
        let acquire = self.store.acquire(&slot, id, limit, self.ttl);
        let ticket = Ticket {
            store: self.store.clone(),
            pending: Some((slot, id)),
            limit,
            class,
        };
        (acquire, ticket)
    }

    fn decide(
        &self,
        acquired: Acquired,
        mut ticket: Ticket<L::Class>,
        extensions: &mut Extensions,
    ) -> Verdict<Self> {
        let report = Report::Concurrent(Concurrent {
            name: self.name.clone(),
            limit: ticket.limit,
            admitted: acquired.is_admitted(),
            in_flight: acquired.in_flight(),
            retry_after: self.retry_after,
        });
        let pending = ticket.pending.take();
        match pending {
            Some((slot, id)) if acquired.is_admitted() => {
                let permit = ConcurrencyPermit::new(self.store.clone(), slot, id);
                extensions.insert(permit.clone());
                Verdict::pass(Some(report), Some(permit))
            }
            _ => {
                let busy = Busy {
                    name: self.name.clone(),
                    limit: ticket.limit,
                    capacity: self.limits.capacity(),
                    in_flight: acquired.in_flight(),
                    retry_after: self.retry_after,
                };
                Verdict::refuse(Some(report), self.limits.refuse(busy, ticket.class))
            }
        }
    }

    fn failed(&self, mut ticket: Ticket<L::Class>, error: &StoreError) -> Option<HeaderValue> {
        // The ticket gives the permit back when dropped, since the store may have admitted it
        // after all, unless the acquisition was never sent: then there is nothing to give back,
        // and releases sent during an outage would only add connection attempts.
        if error.never_sent() {
            ticket.pending = None;
        }
        Some(concurrency_policy(&self.name, ticket.limit))
    }

    fn announced(&self) -> Option<HeaderValue> {
        // Without a key there is no class to pick a share by: name the whole capacity.
        Some(concurrency_policy(&self.name, self.limits.capacity()))
    }

    fn names(&self) -> Vec<&str> {
        vec![&self.name]
    }
}

impl<L: fmt::Debug> fmt::Debug for ConcurrencyLimiter<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimiter")
            .field("name", &self.name)
            .field("limits", &self.limits)
            .field("ttl", &self.ttl)
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}
