//! [`Meter`]: how the ledger meters the grants of a global rule's slots (`policy::global` says
//! what the slots are), as the rule's algorithm would: what `lua/ledger.lua` is told with each
//! take and credit.
//!
//! - **Window** (a fixed window; its slot is the window): at most `Q` granted of a slot.
//! - **Sliding** (a sliding window of `k` sub-intervals): at most `Q` granted of any `k`
//!   consecutive slots. A take of slot `s` reads the grants of slots `s-k+1 ..= s+k-1`.
//! - **Bucket** (GCRA, token bucket): a token bucket of `B` (the burst) refilled `Q / k` a slot,
//!   on the ledger, evaluated at the slot a take is for, or at the latest slot it was evaluated
//!   at if that is later (a take of the current slot after one of the next): grants of slots
//!   `j ..= j+m-1` come out of the bucket at slots `j ..= j+m`, at most `B + m × Q / k`. A take of
//!   a slot more than one behind the bucket's grants nothing.
//!
//! Each also says how long the ledger must remember a slot's grants ([`memory_us`](Meter::memory_us)):
//! a take's TTL, and the fence of a ledger declared new (its windows that an earlier life may
//! have metered are not granted).

use crate::policy::Policy;

/// How the ledger meters a global rule's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Meter {
    Window,
    Sliding { slots: u32 },
    Bucket { slots: u32, burst: u32 },
}

impl Meter {
    /// The meter of a global `policy`'s rule.
    pub(crate) fn of(policy: &Policy) -> Self {
        let rule = &policy.rules()[0];
        let slots = policy.slot_count();
        if rule.algorithm().uses_burst() {
            Meter::Bucket {
                slots,
                burst: rule.quota().burst(),
            }
        } else if slots > 1 {
            Meter::Sliding { slots }
        } else {
            Meter::Window
        }
    }

    /// The name `lua/ledger.lua` knows it by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Meter::Window => "window",
            Meter::Sliding { .. } => "sliding",
            Meter::Bucket { .. } => "bucket",
        }
    }

    pub(crate) fn slots(self) -> u32 {
        match self {
            Meter::Window => 1,
            Meter::Sliding { slots } | Meter::Bucket { slots, .. } => slots,
        }
    }

    /// The most units one slot may be granted: the quota `limit`, or a bucket's burst.
    pub(crate) fn most(self, limit: u64) -> u64 {
        match self {
            Meter::Bucket { burst, .. } => u64::from(burst),
            _ => limit,
        }
    }

    /// How long (µs) after a slot ends its grants still bear on what the ledger may grant: a
    /// window's period (the sliding window's whole period: `k` slots); a bucket's time to refill
    /// its burst from empty, and two slots more (a take may be evaluated one slot late, and
    /// regions take one slot ahead).
    pub(crate) fn memory_us(self, limit: u64, slot_us: u64) -> u64 {
        let slots = match self {
            Meter::Window => 1,
            Meter::Sliding { slots } => u64::from(slots),
            Meter::Bucket { slots, burst } => {
                (u64::from(burst) * u64::from(slots)).div_ceil(limit.max(1)) + 2
            }
        };
        slots.saturating_mul(slot_us)
    }

    /// The slots whose grants a take of slot `index` reads, in order: a sliding window's
    /// `index - (k - 1) ..= index + (k - 1)`, every period that holds the slot; none for the
    /// others. (Slot indices count from the Unix epoch: far above `k`.)
    pub(crate) fn slots_read(self, index: u64) -> std::ops::Range<u64> {
        match self {
            Meter::Sliding { slots } => {
                let reach = u64::from(slots) - 1;
                index.saturating_sub(reach)..index.saturating_add(reach + 1)
            }
            _ => index..index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliding_window_reads_the_slots_of_every_period_that_holds_its_slot() {
        let meter = Meter::Sliding { slots: 3 };
        assert_eq!(meter.slots_read(10), 8..13);
        assert_eq!(Meter::Window.slots_read(10).count(), 0);
        assert_eq!(meter.memory_us(100, 1_000), 3_000);
        // A bucket of 50 refilled 25 a slot: two slots to refill, two more.
        let bucket = Meter::Bucket {
            slots: 4,
            burst: 50,
        };
        assert_eq!(bucket.memory_us(100, 1_000_000), 4_000_000);
        assert_eq!(bucket.most(100), 50);
    }
}
