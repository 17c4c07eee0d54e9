//! One quota across regions: [global policies](crate::Policy::global) decided in each region,
//! never more than the quota worldwide (feature `regions`).
//!
//! Each region runs its instances and its own Redis, and wraps that Redis's store in a
//! [`RegionStore`]. A [`Ledger`], in one Redis (or a Redis Cluster) that every region reaches,
//! hands out *allotments*: units of a key's window quota that one region may spend. A region
//! decides every request from what it holds, in its own Redis, with no call across regions; in
//! the background, the instance that leads the region reports its demand to the ledger and moves
//! units between them (take, apply, surrender, credit: each idempotent, by a move id). Units of
//! a window are only spent in that window, so an allotment ends with its window. A take's
//! answer says the region's share and what the other regions wait for, and a region holding
//! more than its share gives that back (a surrender and a credit like any other): shares
//! follow demand within about a second, when it spreads to new regions too.
//!
//! **The bound.** For every key and window, the units the ledger grants never sum above the
//! quota `Q` (it hands out only free units, and a credit frees only what a region surrendered
//! first); a region spends only units applied to it, each applied once; so the regions spend at
//! most `Q` of the window. Windows are aligned to the Unix epoch and a region spends window `w`
//! only while its clock reads `[start + max_skew, end - max_skew)`: with every clock within
//! `max_skew` of true time, what is spent of `w` is spent within `w`. In
//! [emergency mode](PartitionMode::Emergency), a region cut off from the ledger adds
//! `floor(fraction × Q)` once per window: at most `Q + Σ fraction × Q` in a window.
//! Failover of the ledger's Redis loses no take that counted (each waits for the replicas),
//! and a ledger that lost its data grants nothing until [declared](Ledger::declare),
//! which fences the windows it may have granted. `docs/regions.md` has the design, the failure
//! table and the measurements.

mod allotment;
mod declaration;
mod demand;
mod global_key;
mod holdings;
mod ledger;
mod mover;
mod pace;
mod partition;
mod rate;
mod shared;
mod store;
mod window;

pub use self::declaration::{Birth, Declared};
pub use self::holdings::{Holding, RegionHolding};
pub use self::ledger::Ledger;
pub use self::partition::PartitionMode;
pub use self::store::{DEFAULT_MAX_SKEW, RegionStore, RegionStoreBuilder};
