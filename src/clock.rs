//! Time sources. Stores read time through a [`Clock`], so tests drive it by hand instead of sleeping.
//!
//! Time is a count of microseconds since the Unix epoch, the unit of the Lua scripts, so that the
//! memory store and the Redis store compute with the same numbers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time in microseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time, in microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }
}

/// The system clock, made monotonic: wall time read once, then advanced by a monotonic clock, so
/// a backwards NTP step never moves a limiter's time backwards.
///
/// The monotonic clock is [`quanta`]'s: the CPU's invariant time-stamp counter where it has one
/// (a few nanoseconds a read, against tens for the OS clock), the OS monotonic clock otherwise.
/// The clock is held and read directly: `quanta::Instant::now` would look up quanta's global clock
/// and its mocking hook on every read, which cost as much as the read itself.
#[derive(Debug, Clone)]
pub struct SystemClock {
    clock: quanta::Clock,
    anchor_raw: u64,
    anchor_micros: u64,
}

impl SystemClock {
    /// A clock anchored at the current wall time.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let anchor_raw = clock.raw();
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Self {
            clock,
            anchor_raw,
            anchor_micros: micros(since_epoch),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        // Zero, not a wrapped huge delta, if the counter reads below the anchor (cores whose
        // counters disagree): time then stands still for a moment rather than jumping.
        let elapsed_ns = self.clock.delta_as_nanos(self.anchor_raw, self.clock.raw());
        self.anchor_micros.saturating_add(elapsed_ns / 1_000)
    }
}

/// A clock that only moves when told to. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use tower_redis_ratelimit::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000_000);
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now_micros(), 1_250_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    micros: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `micros` microseconds since the Unix epoch.
    pub fn new(micros: u64) -> Self {
        Self {
            micros: Arc::new(AtomicU64::new(micros)),
        }
    }

    /// A clock showing the current wall time, from then on moved by hand.
    pub fn starting_now() -> Self {
        Self::new(SystemClock::new().now_micros())
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.micros.fetch_add(micros(by), Ordering::SeqCst);
    }

    /// Sets the clock (it may go backwards, to test how stores cope with skew).
    pub fn set(&self, micros: u64) {
        self.micros.store(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(Ordering::SeqCst)
    }
}

pub(crate) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_follows_wall_time_and_never_goes_back() {
        let clock = SystemClock::new();
        // Each reading of the clock is bracketed by two of the OS clock, so a thread preempted
        // between two readings widens the bracket instead of failing the test.
        let start_before = std::time::Instant::now();
        let first = clock.now_micros();
        let start_after = std::time::Instant::now();
        let wall = micros(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
        assert!(first.abs_diff(wall) < 50_000, "{first} vs wall {wall}");
        let mut last = first;
        while start_after.elapsed() < Duration::from_millis(20) {
            let now = clock.now_micros();
            assert!(now >= last, "went back from {last} to {now}");
            last = now;
        }
        let end_before = std::time::Instant::now();
        let end = clock.now_micros();
        let end_after = std::time::Instant::now();
        assert!(end >= last, "went back from {last} to {end}");
        // Measured against the OS clock: a unit mistake (ns for µs) would be 1000 times off.
        let advanced = end - first;
        let shortest = micros(end_before - start_after);
        let longest = micros(end_after - start_before);
        assert!(
            advanced + 1_000 >= shortest && advanced <= longest + 1_000,
            "advanced {advanced} µs, the OS clock between {shortest} and {longest} µs"
        );
    }
}
