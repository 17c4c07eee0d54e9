//! [`SlotLimit`]: how many permits of its slot a request may share, decided per request. A
//! per-key limit is one answer ([`PerKey`]); the fleet shedder's shares by priority are another,
//! given to the same limiter.

use http::request::Parts;

use super::ConcurrencyLimitRejection;
use super::busy::Busy;
use crate::admission::Sealed;
use crate::key::Key;

/// How many permits of its slot a request may share, and how it is refused when none is free.
/// Sealed: [`PerKey`] and the fleet shedder's [`FleetShares`](crate::shed::FleetShares) are the
/// two limits a [`ConcurrencyLimiter`](super::ConcurrencyLimiter) is given.
// Hidden from the docs: sealed, and named only in the layers' own types.
#[doc(hidden)]
pub trait SlotLimit: Sealed + Send + Sync + 'static {
    /// Why a request was refused, as the layer's `on_rejection` hook receives it.
    type Rejection: Send + Sync + 'static;
    /// What a request is, for its limit (the fleet shedder's priority).
    type Class: Copy + Send + Sync + 'static;

    /// The class of a request, decided from its head (which may record it in the extensions).
    fn classify(&self, parts: &mut Parts) -> Self::Class;

    /// The client key of a request's slot, from the layer's key (empty when it keys nothing).
    fn slot_key(&self, key: Key) -> Key;

    /// Admit a request of `class` only while fewer permits than this are held.
    fn limit(&self, class: Self::Class) -> u32;

    /// The whole capacity: what a response without a class announces.
    fn capacity(&self) -> u32;

    /// The refusal of a request of `class` that found its slot full.
    fn refuse(&self, busy: Busy, class: Self::Class) -> Self::Rejection;
}

/// At most `max` requests in flight per key: what a
/// [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer) enforces.
#[derive(Clone, Copy, Debug)]
pub struct PerKey {
    pub(super) max: u32,
}

impl Sealed for PerKey {}

impl SlotLimit for PerKey {
    type Rejection = ConcurrencyLimitRejection;
    type Class = ();

    fn classify(&self, _: &mut Parts) {}

    fn slot_key(&self, key: Key) -> Key {
        key
    }

    fn limit(&self, (): ()) -> u32 {
        self.max
    }

    fn capacity(&self) -> u32 {
        self.max
    }

    fn refuse(&self, busy: Busy, (): ()) -> ConcurrencyLimitRejection {
        crate::telemetry::concurrency_refused(busy.name());
        ConcurrencyLimitRejection::Busy(busy)
    }
}
