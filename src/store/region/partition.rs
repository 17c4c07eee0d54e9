//! [`PartitionMode`]: what a region cut off from the ledger spends once its allotments run out.

/// What a region spends when it cannot reach the ledger (no answer for `partition_after`, see
/// [`RegionStoreBuilder::partition_after`](super::RegionStoreBuilder::partition_after)): it
/// always keeps spending the allotments it holds; then:
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "config", derive(serde::Deserialize))]
#[cfg_attr(
    feature = "config",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
#[non_exhaustive]
pub enum PartitionMode {
    /// Refuses: never more than the quota worldwide (the default).
    #[default]
    Refuse,
    /// Grants itself `fraction` of the quota (in `(0, 1]`) for each window it is cut off in, on
    /// top of what it holds: in such a window the world admits at most `Q + Σ fraction × Q` over
    /// the regions cut off (every region, at worst).
    Emergency {
        /// The share of the quota a region cut off spends per window.
        fraction: f64,
    },
}

impl PartitionMode {
    /// The emergency units of a quota of `quota` per window: `floor(fraction × quota)`.
    pub(crate) fn emergency_units(self, quota: u64) -> u64 {
        match self {
            PartitionMode::Refuse => 0,
            // A fraction in (0, 1] of a u32 quota: exact enough in f64, and never above it.
            PartitionMode::Emergency { fraction } => {
                ((quota as f64) * fraction).floor().clamp(0.0, quota as f64) as u64
            }
        }
    }
}
