//! [`Heat`]: whether a key may be hot, answered without a lock, so that keys that are not cost
//! leases nothing.
//!
//! Leases pay off for a key asked several times a lifetime here; most keys of a public API are
//! asked once in a while. Counting those in the lease table (a lock, a lookup, an entry made and
//! swept) costs every request for nothing, so a request first counts itself in one of a fixed
//! array of atomic counters, picked by its key's hash, per lifetime-long window: only a key whose
//! counter shows a second request in the window reaches the table. Keys that share a counter may
//! look hot together; the table then measures their demand itself, so a false alarm costs a
//! lookup, never a lease.

use std::sync::atomic::{AtomicU32, Ordering};

/// Counters per key the table may hold: sparse enough that cold keys rarely share one.
const COUNTERS_PER_KEY: usize = 4;

/// The most counters: 256 KiB.
const MAX_COUNTERS: usize = 1 << 16;

/// Requests in a window from which a key is worth the table's look.
const WARM: u32 = 2;

/// Per counter, the window it counts (16 bits of its index) and the requests counted in it (16
/// bits, saturating).
pub(super) struct Heat {
    counters: Box<[AtomicU32]>,
    lifetime_us: u64,
}

impl Heat {
    /// Counters for a table of at most `max_keys`, in windows of `lifetime_us`.
    pub(super) fn new(max_keys: usize, lifetime_us: u64) -> Self {
        let counters = max_keys
            .saturating_mul(COUNTERS_PER_KEY)
            .clamp(1, MAX_COUNTERS)
            .next_power_of_two();
        Self {
            counters: (0..counters).map(|_| AtomicU32::new(0)).collect(),
            lifetime_us: lifetime_us.max(1),
        }
    }

    /// Counts a request of the key hashed to `hash` at `now` (µs), and says whether the key was
    /// asked at least twice in this window. Racy by design: two threads may count one request
    /// between them, which only makes a key look hot a request early or late.
    #[inline]
    pub(super) fn warm(&self, hash: u64, now: u64) -> bool {
        let counter = &self.counters[(hash as usize) & (self.counters.len() - 1)];
        let window = ((now / self.lifetime_us) & 0xffff) as u32;
        let seen = counter.load(Ordering::Relaxed);
        let (seen_window, seen_count) = (seen >> 16, seen & 0xffff);
        let (count, warm) = if seen_window == window {
            let count = seen_count.saturating_add(1).min(0xffff);
            (count, count >= WARM)
        } else {
            // Warm in the window before: still warm, so that a hot key keeps its lease across
            // windows; this request alone counts in the new one.
            let before = seen_window == (window.wrapping_sub(1) & 0xffff) && seen_count >= WARM;
            (1, before)
        };
        counter.store(window << 16 | count, Ordering::Relaxed);
        warm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_warm_from_its_second_request_in_a_window() {
        let heat = Heat::new(100, 1_000);
        assert!(!heat.warm(7, 0));
        assert!(heat.warm(7, 10));
        assert!(heat.warm(7, 999));
        // A key warm in a window stays warm in the next, then cools if asked once.
        assert!(heat.warm(7, 1_000));
        assert!(!heat.warm(7, 2_500));
        // Another counter is apart.
        assert!(!heat.warm(8, 1_001));
    }

    #[test]
    fn counters_scale_with_the_table_within_a_bound() {
        assert_eq!(Heat::new(100, 1).counters.len(), 512);
        assert_eq!(Heat::new(10_000_000, 1).counters.len(), MAX_COUNTERS);
    }
}
