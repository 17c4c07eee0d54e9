//! [`Meter`]: how the ledger meters the grants of a global rule's windows (`policy::global` says
//! what the windows are), as the rule's algorithm would: what `lua/ledger.lua` is told with each
//! take and credit.
//!
//! - **Window** (a fixed window, allotted in its own windows): at most `Q` granted of a window.
//! - **Sliding** (a sliding window of `k` sub-intervals): at most `Q` granted of any `k`
//!   consecutive windows. A take of window `s` reads the grants of windows `s-k+1 ..= s+k-1`.
//! - **Bucket** (GCRA, token bucket): a token bucket of `B` (the burst) refilled `Q / k` a window,
//!   on the ledger, evaluated at the window a take is for, or at the latest window it was evaluated
//!   at if that is later (a take of the current window after one of the next): grants of windows
//!   `j ..= j+m-1` come out of the bucket at windows `j ..= j+m`, at most `B + m × Q / k`. A take of
//!   a window more than one behind the bucket's grants nothing.
//!
//! Each also says how long the ledger must remember a window's grants ([`memory_us`](Meter::memory_us)):
//! a take's TTL, and the fence of a ledger declared new (its windows that an earlier life may
//! have metered are not granted).

use crate::policy::Policy;

/// How the ledger meters a global rule's windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Meter {
    Window,
    Sliding { windows: u32 },
    Bucket { windows: u32, burst: u32 },
}

impl Meter {
    /// The meter of a global `policy`'s rule.
    pub(crate) fn of(policy: &Policy) -> Self {
        let rule = &policy.rules()[0];
        let windows = policy.window_count();
        if rule.algorithm().uses_burst() {
            Meter::Bucket {
                windows,
                burst: rule.quota().burst(),
            }
        } else if windows > 1 {
            Meter::Sliding { windows }
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

    pub(crate) fn windows(self) -> u32 {
        match self {
            Meter::Window => 1,
            Meter::Sliding { windows } | Meter::Bucket { windows, .. } => windows,
        }
    }

    /// The most units one window may be granted: the quota `limit`, or a bucket's burst.
    pub(crate) fn most(self, limit: u64) -> u64 {
        match self {
            Meter::Bucket { burst, .. } => u64::from(burst),
            _ => limit,
        }
    }

    /// How long (µs) after a window ends its grants still bear on what the ledger may grant: a
    /// window's period (the sliding window's whole period: `k` windows); a bucket's time to refill
    /// its burst from empty, and two windows more (a take may be evaluated one window late, and
    /// regions take one window ahead).
    pub(crate) fn memory_us(self, limit: u64, window_us: u64) -> u64 {
        let windows = match self {
            Meter::Window => 1,
            Meter::Sliding { windows } => u64::from(windows),
            Meter::Bucket { windows, burst } => {
                (u64::from(burst) * u64::from(windows)).div_ceil(limit.max(1)) + 2
            }
        };
        windows.saturating_mul(window_us)
    }

    /// Whether units of a window that has ended still count on the ledger: a sliding window's
    /// grants bear on the `k - 1` windows after it, and a bucket's unspent units credited back
    /// refill it where it stands (as if never granted, the bucket would hold at least as many);
    /// a fixed window's end frees them all. Where they count, a region gives back what it did not
    /// spend of a window once it ends, and the units a take brought in too late to spend.
    pub(crate) fn ended_units_count(self) -> bool {
        !matches!(self, Meter::Window)
    }

    /// The windows whose grants a take of window `index` reads, in order: a sliding window's
    /// `index - (k - 1) ..= index + (k - 1)`, every period that holds the window; none for the
    /// others. (Window indices count from the Unix epoch: far above `k`.)
    pub(crate) fn windows_read(self, index: u64) -> std::ops::Range<u64> {
        match self {
            Meter::Sliding { windows } => {
                let reach = u64::from(windows) - 1;
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
    fn a_sliding_window_reads_the_windows_of_every_period_that_holds_its_window() {
        let meter = Meter::Sliding { windows: 3 };
        assert_eq!(meter.windows_read(10), 8..13);
        assert_eq!(Meter::Window.windows_read(10).count(), 0);
        assert_eq!(meter.memory_us(100, 1_000), 3_000);
        // A bucket of 50 refilled 25 a window: two windows to refill, two more.
        let bucket = Meter::Bucket {
            windows: 4,
            burst: 50,
        };
        assert_eq!(bucket.memory_us(100, 1_000_000), 4_000_000);
        assert_eq!(bucket.most(100), 50);
    }
}
