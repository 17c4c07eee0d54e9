//! Warnings that cannot flood the log: during a store outage every request fails the same way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Lets one warning through per interval and counts the ones it held back.
pub(crate) struct Throttled {
    epoch: Instant,
    interval_ms: u64,
    /// When the next warning may be logged, in ms since `epoch`.
    next_ms: AtomicU64,
    suppressed: AtomicU64,
}

impl Throttled {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            epoch: Instant::now(),
            interval_ms: interval.as_millis() as u64,
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Calls `log` with the number of warnings held back since the last one, unless a warning was
    /// logged less than an interval ago.
    pub(crate) fn warn(&self, log: impl FnOnce(u64)) {
        let now = self.epoch.elapsed().as_millis() as u64;
        let next = self.next_ms.load(Ordering::Relaxed);
        if now >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now + self.interval_ms,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            log(self.suppressed.swap(0, Ordering::Relaxed));
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_interval_with_a_count_of_the_rest() {
        let throttled = Throttled::new(Duration::from_secs(3600));
        let mut logged = Vec::new();
        for _ in 0..5 {
            throttled.warn(|suppressed| logged.push(suppressed));
        }
        assert_eq!(logged, [0]);
        assert_eq!(throttled.suppressed.load(Ordering::Relaxed), 4);
    }
}
