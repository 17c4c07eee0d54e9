//! Everything a client is told: the rate-limit headers of every response a layer answers or
//! passes on, the problem+json bodies of refusals, their gRPC form, and the `on_rejection` hook
//! that replaces a default body.
//!
//! What each header means, which response carries it, and what each refusal's body says is the
//! [headers reference](crate::guide::headers). This module knows no store and no middleware: a
//! middleware reports what it decided (a rate decision, a concurrency decision, no decision, a
//! shedder's wait, a rejection), and this module writes it. The
//! [architecture guide](crate::guide::architecture) places it on a request's path.

mod grpc;
mod headers;
mod problem;
mod rate_limited;
mod refusals;
mod responder;

#[cfg(feature = "concurrency")]
pub(crate) use self::headers::{Concurrent, concurrency_policy};
pub use self::headers::{HeaderFamilies, PolicyHeaders};
pub(crate) use self::headers::{Partition, Partitioner, RatePolicy, Report, Stamp, Undecided};
#[cfg(test)]
pub(crate) use self::problem::problem_body;
pub(crate) use self::rate_limited::rate_limited;
#[cfg(feature = "concurrency")]
pub(crate) use self::refusals::slot_full;
pub(crate) use self::refusals::{denied, missing_key, unavailable};
#[cfg(feature = "shed")]
pub(crate) use self::refusals::{fleet_shed, overloaded};
pub(crate) use self::responder::{Hook, Responder};
