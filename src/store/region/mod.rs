//! One quota across regions: [global policies](crate::Policy::global) decided in each region,
//! never more than the quota worldwide (feature `regions`).
//!
//! Each region runs its instances and its own Redis, and wraps that Redis's store in a
//! [`RegionStore`]. A [`Ledger`], in one Redis (or a Redis Cluster) that every region reaches,
//! hands out *allotments*: units of a key's window of quota that one region may spend. A region
//! decides every request from what it holds, in its own Redis, with no call across regions; in
//! the background, the instance that leads the region reports its demand to the ledger and moves
//! units between them (take, apply, surrender, credit: each idempotent, by a move id). Units of
//! a window are only spent in that window, so an allotment ends with its window. A take's
//! answer says the region's share and what the other regions wait for, and a region holding
//! more than its share gives that back (a surrender and a credit like any other): shares
//! follow demand within about a second, when it spreads to new regions too.
//!
//! **Windows.** A global rule's quota `Q` per period is allotted in *windows* aligned to the Unix
//! epoch (`policy::global`): a fixed window's windows, a sliding window's `k` sub-intervals, or
//! for GCRA and the token bucket `k` windows that each refill at most half the burst `B`. Below, a
//! window is the window that regions and the ledger count.
//!
//! **The bound.** The ledger meters the grants of consecutive windows as the rule's algorithm
//! would (`Meter`): at most `Q` of a fixed window; at most `Q` of any `k` consecutive windows of a
//! sliding window; for a bucket, a token bucket of `B` refilled `Q / k` a window, so at most
//! `B + m × Q / k` of any `m` consecutive windows. It hands out only what its meter leaves, and a
//! credit frees only what a region surrendered first; a region spends only units applied to it,
//! each applied once; so the regions spend at most what the meter allows. Windows are aligned to
//! the Unix epoch and a region spends window `w` only while its clock reads
//! `[start + max_skew, end - max_skew)`: with every clock within `max_skew` of true time, what
//! is spent of `w` is spent within `w`. So a fixed window admits at most `Q` a window
//! worldwide, a sliding window at most `Q` in any `k` consecutive sub-intervals, a bucket at
//! most `B + (⌈t/σ⌉ + 1) × Q / k ≤ 2B + Q × t / P` in any interval of `t` (windows of `σ`). In
//! [emergency mode](PartitionMode::Emergency), a region cut off from the ledger adds
//! `floor(fraction × floor(Q / k))` once per window: at most `Σ fraction × Q` more in any `k`
//! consecutive windows.
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
mod meter;
#[cfg(test)]
mod metered_takes;
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
