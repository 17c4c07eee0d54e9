//! Distributed concurrency limits: at most N requests (or WebSocket connections) in flight per
//! key, across every server that shares the store.
//!
//! A request takes a *permit* from its *slot* (a limit name and a client key) before it runs and
//! gives it back when its response body is finished or dropped, when it is cancelled, when the
//! handler panics or fails. Permits are *leases*: the store forgets one that is not renewed within
//! the lease, and one background task per store (the heartbeat) renews every live permit of the
//! process, so a crashed or partitioned server's slots come back within a lease while long
//! requests keep theirs. See `docs/concurrency.md` for the protocol.
//!
//! - [`ConcurrencyLimitLayer`]: the tower layer.
//! - [`ConcurrencyPermit`]: a held slot, in the request extensions; move a clone into a WebSocket
//!   task to hold the slot for the life of the connection.
//! - [`Slot`], [`PermitId`], [`Lease`], [`Renewal`], [`Acquired`]: what crosses the
//!   [`Store`](crate::Store) boundary.
//! - The fleet usage load shedder ([`FleetShedLayer`](crate::shed::FleetShedLayer)) is the same
//!   machinery on one global slot.
//!
#![doc = include_str!("../../docs/concurrency.md")]

mod body;
mod busy;
mod future;
pub(crate) mod headers;
pub(crate) mod heartbeat;
mod layer;
mod permit;
mod permit_id;
mod service;
mod slot;

pub use body::ConcurrencyBody;
pub use busy::Busy;
pub use future::ResponseFuture;
pub use layer::{ConcurrencyLimitLayer, ConcurrencyLimitLayerBuilder};
pub use permit::ConcurrencyPermit;
pub use permit_id::PermitId;
pub use service::ConcurrencyLimit;
pub use slot::{Acquired, Lease, MAX_LEASE, MIN_LEASE, Renewal, Slot};

pub(crate) use layer::{Admission, Config};
