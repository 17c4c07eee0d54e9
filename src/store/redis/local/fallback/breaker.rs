//! [`Breaker`]: stops calling a failing Redis for a cool-down, then lets one call probe it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

/// A circuit breaker over the calls to Redis.
///
/// - **Closed**: every call goes to Redis; `failures` failures in a row open it.
/// - **Open**: no call goes to Redis until the cool-down has passed, so a dead or frozen Redis
///   costs no request any latency.
/// - **Probing**: the first call after the cool-down goes to Redis alone; the others keep away.
///   Its success closes the breaker, its failure (or its abandonment: a caller that gave up at
///   its deadline) opens it again for another cool-down, so Redis's return causes no stampede.
pub(super) struct Breaker {
    state: Mutex<State>,
    failures: u32,
    cool_down: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    Probing,
}

/// Whether a call may go to Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store::redis) enum Pass {
    /// Yes: report its outcome.
    Call,
    /// Yes, as the one probe: report its outcome (or it counts as failed when dropped).
    Probe,
    /// No: answer without Redis.
    Refuse,
}

impl Breaker {
    pub(super) fn new(failures: u32, cool_down: Duration) -> Self {
        Self {
            state: Mutex::new(State::Closed { failures: 0 }),
            failures,
            cool_down,
        }
    }

    /// Whether a call made at `now` may go to Redis.
    pub(super) fn pass(&self, now: Instant) -> Pass {
        let mut state = lock(&self.state);
        match *state {
            State::Closed { .. } => Pass::Call,
            State::Open { until } if now >= until => {
                *state = State::Probing;
                Pass::Probe
            }
            State::Open { .. } | State::Probing => Pass::Refuse,
        }
    }

    /// Redis answered a call.
    pub(super) fn succeeded(&self) {
        let mut state = lock(&self.state);
        if *state != (State::Closed { failures: 0 }) {
            if *state == State::Probing {
                tracing::info!("Redis answers again; limits are decided by Redis again");
            }
            *state = State::Closed { failures: 0 };
        }
    }

    /// A call failed (or was abandoned) at `now`; `probe` when it was the probe.
    pub(super) fn failed(&self, now: Instant, probe: bool) {
        let mut state = lock(&self.state);
        match *state {
            State::Closed { failures } if failures + 1 < self.failures => {
                *state = State::Closed {
                    failures: failures + 1,
                };
            }
            State::Closed { .. } => {
                tracing::warn!(
                    cool_down = ?self.cool_down,
                    "Redis failed {} times in a row; deciding without it until a probe succeeds",
                    self.failures
                );
                *state = State::Open {
                    until: now + self.cool_down,
                };
            }
            State::Probing if probe => {
                *state = State::Open {
                    until: now + self.cool_down,
                };
            }
            // A call sent before the breaker opened, failing late: the breaker already knows.
            State::Open { .. } | State::Probing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOL_DOWN: Duration = Duration::from_secs(1);

    #[test]
    fn consecutive_failures_open_it_and_a_success_in_between_resets_the_count() {
        let breaker = Breaker::new(3, COOL_DOWN);
        let now = Instant::now();
        breaker.failed(now, false);
        breaker.failed(now, false);
        breaker.succeeded();
        breaker.failed(now, false);
        breaker.failed(now, false);
        assert_eq!(breaker.pass(now), Pass::Call);
        breaker.failed(now, false);
        assert_eq!(breaker.pass(now), Pass::Refuse);
        assert_eq!(breaker.pass(now + COOL_DOWN / 2), Pass::Refuse);
    }

    #[test]
    fn after_the_cool_down_one_call_probes_and_its_outcome_decides() {
        let breaker = Breaker::new(1, COOL_DOWN);
        let now = Instant::now();
        breaker.failed(now, false);
        let later = now + COOL_DOWN;
        assert_eq!(breaker.pass(later), Pass::Probe);
        // Only one probe at a time.
        assert_eq!(breaker.pass(later), Pass::Refuse);
        // A failed probe: another cool-down.
        breaker.failed(later, true);
        assert_eq!(breaker.pass(later + COOL_DOWN / 2), Pass::Refuse);
        assert_eq!(breaker.pass(later + COOL_DOWN), Pass::Probe);
        breaker.succeeded();
        assert_eq!(breaker.pass(later + COOL_DOWN), Pass::Call);
    }

    #[test]
    fn a_late_failure_of_a_call_sent_before_the_probe_does_not_count_as_the_probe() {
        let breaker = Breaker::new(1, COOL_DOWN);
        let now = Instant::now();
        breaker.failed(now, false);
        assert_eq!(breaker.pass(now + COOL_DOWN), Pass::Probe);
        breaker.failed(now + COOL_DOWN, false);
        breaker.succeeded();
        assert_eq!(breaker.pass(now + COOL_DOWN), Pass::Call);
    }
}
