//! [`Limits`]: how many permits a request may share, decided per request. A per-key limit is one
//! answer ([`PerKey`]); the fleet shedder's shares by priority are another, given to the same
//! limiter.

use http::request::Parts;

use super::Rejection;
use super::busy::Busy;
use crate::admission::{KeySource, Keys};
use crate::key::Key;

/// How many permits a request may share, and how it is refused when none is free.
#[allow(unreachable_pub)]
pub trait Limits: Send + Sync + 'static {
    /// Why a request was refused, as the layer's `on_rejection` hook receives it.
    type Rejection: Send + Sync + 'static;
    /// Where requests get their keys.
    type Keys: KeySource<Self::Rejection, Key = Self::Key>;
    /// What the layer keys a request by.
    type Key;
    /// What a request is, for its limit (the fleet shedder's priority).
    type Class: Copy + Send + Sync + 'static;
    /// The settings these limits add to a concurrency limit's.
    type Settings: Default + Send;

    /// The class of a request, decided from its head (which may record it in the extensions).
    fn classify(&self, parts: &mut Parts) -> Self::Class;

    /// The client key of a request's slot.
    fn slot_key(&self, key: Self::Key) -> Key;

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

impl Limits for PerKey {
    type Rejection = Rejection;
    type Keys = Keys<Rejection>;
    type Key = Key;
    type Class = ();
    /// `max_in_flight`, until the layer is built.
    type Settings = Option<u32>;

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

    fn refuse(&self, busy: Busy, (): ()) -> Rejection {
        crate::telemetry::concurrency_refused(busy.name());
        Rejection::Busy(busy)
    }
}
