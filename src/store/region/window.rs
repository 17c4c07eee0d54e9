//! [`Window`]: the windows of a global rule, aligned to the Unix epoch so that every region
//! counts the same ones, and when a region may spend one ([`spendable`]).
//!
//! Clocks: every instance's clock is assumed within `max_skew` of true time. An instance spends
//! window `w` only while its clock reads `[start + max_skew, end - max_skew)`, so whatever its
//! skew, what it spends of `w` is spent inside `w` in true time, and no true window receives
//! spending of two windows' allotments. The price is `2 × max_skew` of every window in which
//! nothing is admitted.

/// One window of a global rule: its index since the epoch and the rule's period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) index: u64,
    pub(crate) period_us: u64,
}

impl Window {
    /// The window holding the instant `now_us`.
    pub(crate) fn at(now_us: u64, period_us: u64) -> Self {
        Self {
            index: now_us / period_us,
            period_us,
        }
    }

    pub(crate) fn start_us(self) -> u64 {
        self.index.saturating_mul(self.period_us)
    }

    pub(crate) fn end_us(self) -> u64 {
        self.start_us().saturating_add(self.period_us)
    }

    pub(crate) fn next(self) -> Self {
        Self {
            index: self.index + 1,
            ..self
        }
    }

    /// How long (ms, at least 1) state about this window is kept from `now_us`: to its end and
    /// one period more, so that a move retried late still finds the marks of its first try.
    pub(crate) fn ttl_ms(self, now_us: u64) -> u64 {
        let until = self
            .end_us()
            .saturating_add(self.period_us)
            .saturating_sub(now_us);
        until.div_ceil(1_000).max(1)
    }
}

/// Where `now_us` stands for a region spending a rule of `period_us`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spendable {
    /// The window whose allotments may be spent now.
    In(Window),
    /// A guard band at the edge of two windows: nothing may be spent for `wait_us`, when the
    /// next window opens.
    Guard { wait_us: u64 },
}

/// What may be spent at `now_us` (see the module's docs); `period_us` is above `2 × skew_us`.
pub(crate) fn spendable(now_us: u64, period_us: u64, skew_us: u64) -> Spendable {
    let window = Window::at(now_us, period_us);
    let opens = window.start_us() + skew_us;
    let closes = window.end_us() - skew_us;
    if now_us < opens {
        Spendable::Guard {
            wait_us: opens - now_us,
        }
    } else if now_us >= closes {
        Spendable::Guard {
            wait_us: window.end_us() + skew_us - now_us,
        }
    } else {
        Spendable::In(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_aligned_to_the_epoch() {
        let window = Window::at(2_500_000, 1_000_000);
        assert_eq!(window.index, 2);
        assert_eq!((window.start_us(), window.end_us()), (2_000_000, 3_000_000));
        assert_eq!(window.next().start_us(), 3_000_000);
        // To the end, then one period more, in whole ms rounded up.
        assert_eq!(window.ttl_ms(2_500_000), 1_500);
        assert_eq!(window.ttl_ms(2_500_001), 1_500);
        assert_eq!(window.ttl_ms(2_499_999), 1_501);
    }

    #[test]
    fn nothing_is_spent_within_the_skew_of_a_window_edge() {
        let (period, skew) = (1_000_000, 10_000);
        assert_eq!(
            spendable(2_005_000, period, skew),
            Spendable::Guard { wait_us: 5_000 }
        );
        assert_eq!(
            spendable(2_010_000, period, skew),
            Spendable::In(Window::at(2_010_000, period))
        );
        assert_eq!(
            spendable(2_989_999, period, skew),
            Spendable::In(Window::at(2_010_000, period))
        );
        assert_eq!(
            spendable(2_990_000, period, skew),
            Spendable::Guard { wait_us: 20_000 }
        );
    }

    /// Whatever an instance's skew within the bound, what it spends of a window falls inside
    /// that window in true time.
    #[test]
    fn spending_stays_in_its_true_window_under_any_skew_within_the_bound() {
        let (period, skew) = (1_000_000_u64, 10_000_u64);
        let mut rng = fastrand::Rng::with_seed(19);
        for _ in 0..100_000 {
            let truth = rng.u64(10 * period..20 * period);
            let offset = rng.i64(-(skew as i64)..=skew as i64);
            let local = truth.checked_add_signed(offset).unwrap();
            if let Spendable::In(window) = spendable(local, period, skew) {
                assert_eq!(window, Window::at(truth, period), "{truth} {offset}");
            }
        }
    }
}
