//! Everything a client is told: the rate-limit headers of every response a layer answers or
//! passes on.
//!
//! What each header means and which response carries it is the
//! [headers reference](crate::guide::headers). This module knows no store and no middleware: a
//! middleware reports what it decided (a rate decision, a concurrency decision, no decision, a
//! shedder's wait), and this module writes it.

mod headers;

#[cfg(feature = "concurrency")]
pub(crate) use self::headers::{Concurrent, concurrency_policy};
pub use self::headers::{HeaderFamilies, PolicyHeaders};
pub(crate) use self::headers::{
    Partition, Partitioner, RatePolicy, Report, Stamp, Undecided, retry_seconds,
};
