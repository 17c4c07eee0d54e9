//! [`AskRate`]: the rate a region is asked at for a key, from the leader's readings of the
//! region's count of units asked (every instance's).
//!
//! The instances report at their own ticks, so the count grows by none, one or two reports of
//! an instance between two of the leader's readings: a rate from one tick is off by up to half
//! (a share split by such demands swings with it). The rate is read over the last few ticks
//! instead, which follows a change within them (demand that moves away frees its share soon),
//! and across a window's start, where the count starts again from zero: the first reading of a
//! window, often before every instance reported in it, does not read as a demand gone.

use std::collections::VecDeque;

use super::window::Window;

/// Intervals over which the rate is read: ten ticks, a second at the default `sync_every`.
/// Fewer swing more: at five, demands read ±15 % and the shares with them.
const INTERVALS: usize = 10;

/// The leader's latest readings of a key's count of units asked.
#[derive(Default)]
pub(super) struct AskRate {
    /// The last reading: (window index, units asked in it, when read in µs).
    last: Option<(u64, u64, u64)>,
    /// The units asked in each of the last intervals between readings, and its length (µs).
    intervals: VecDeque<(u64, u64)>,
}

impl AskRate {
    /// The window of the last reading when a reading of `window` would start a new one: the
    /// mover then reads that window's count once more, for the asks reported in it since.
    pub(super) fn crossing(&self, window: Window) -> Option<Window> {
        let (index, _, _) = self.last?;
        (index + 1 == window.index).then_some(Window { index, ..window })
    }

    /// Notes that `asked` units of `window` were asked by `now_us`, and returns the rate in
    /// units per µs. `ended` is the count of the window before, read now, when this reading
    /// crosses into a new window ([`crossing`](Self::crossing)); `first_us`, when this instance
    /// was first asked in `window`, and `tick_us` are for a first reading.
    pub(super) fn read(
        &mut self,
        window: Window,
        asked: u64,
        now_us: u64,
        ended: Option<u64>,
        (first_us, tick_us): (u64, u64),
    ) -> f64 {
        let interval = match (self.last, ended) {
            (Some((index, before, at)), _) if index == window.index => {
                Some((asked.saturating_sub(before), now_us.saturating_sub(at)))
            }
            // Across a window's start: the rest of the window before, and this one's.
            (Some((_, before, at)), Some(ended)) => Some((
                ended.saturating_sub(before) + asked,
                now_us.saturating_sub(at),
            )),
            _ => None,
        };
        self.last = Some((window.index, asked, now_us));
        let Some(interval) = interval else {
            // A first reading: what was asked since this instance was first asked (or since
            // the window started), over a tick at least. It reads low (the other instances'
            // asks of the same time are reported at their next tick): not kept.
            self.intervals.clear();
            let since = window.start_us().max(first_us);
            return asked as f64 / now_us.saturating_sub(since).max(tick_us) as f64;
        };
        self.intervals.push_back(interval);
        if self.intervals.len() > INTERVALS {
            self.intervals.pop_front();
        }
        // A change beyond what the reports' phases make (the last two ticks at half, or twice,
        // the rate of those before): the rate starts again from the last tick, the one surely
        // after the change, so that demand that stops or starts is followed within two ticks,
        // not ten.
        // Only where the last ticks hold enough units to tell (counted, or expected at the rate
        // before): a demand of a unit every third tick reads as none in two ticks as often as not,
        // and a leader that took that for a demand gone would give back its units and take
        // them again, tick after tick.
        let recent = self.intervals.len().saturating_sub(RECENT);
        let before = rate(self.intervals.iter().take(recent));
        let short = rate(self.intervals.iter().skip(recent));
        let (units, micros) = totals(self.intervals.iter().skip(recent));
        let telling = (units as f64).max(before * micros as f64) >= TELLING_UNITS;
        if recent >= RECENT && telling && (2.0 * short < before || short > 2.0 * before) {
            self.intervals.drain(..self.intervals.len() - 1);
        }
        rate(self.intervals.iter())
    }
}

/// Intervals whose rate, against that of those before, tells a change from the reports'
/// phases: two ticks hold two to six reports of two instances that report one each a tick, so
/// phases alone never make half or twice the rate.
const RECENT: usize = 2;

/// The units the last ticks must hold, counted or expected, for a change of rate to be told
/// from chance: with 8 expected, none or fewer than half come by chance rarely.
const TELLING_UNITS: f64 = 8.0;

/// Units and µs over `intervals`.
fn totals<'a>(intervals: impl Iterator<Item = &'a (u64, u64)>) -> (u64, u64) {
    intervals.fold((0, 0), |(units, micros), interval| {
        (units + interval.0, micros + interval.1)
    })
}

/// Units per µs over `intervals`.
fn rate<'a>(intervals: impl Iterator<Item = &'a (u64, u64)>) -> f64 {
    let (units, micros) = totals(intervals);
    units as f64 / micros.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: u64 = 100_000;

    /// A reader of one key's rate in a window of a minute from its second on: called with a
    /// tick's number and the units asked in that tick, it returns the rate read (units a
    /// second).
    fn ticks() -> impl FnMut(u64, u64) -> f64 {
        let window = Window::at(10_000_000, 60_000_000);
        let start = window.start_us() + 1_000_000;
        let mut rate = AskRate::default();
        let mut asked = 0;
        move |tick, units| {
            asked += units;
            rate.read(window, asked, start + tick * TICK, None, (start, TICK)) * 1e6
        }
    }

    #[test]
    fn the_rate_is_read_over_several_ticks_and_follows_a_change_within_them() {
        let mut read = ticks();
        // 100 units a second from two instances reporting 5 units each per tick, at their own
        // phases: a reading holds one, two or three reports.
        let seen: Vec<f64> = [10, 5, 15, 10, 10, 5, 15, 10, 5, 15]
            .into_iter()
            .zip(1..)
            .map(|(units, tick)| read(tick, units))
            .collect();
        // From the third reading on, within a tenth of 100 a second, where one tick's count
        // says 50 or 150.
        for rate in &seen[2..] {
            assert!((90.0..=110.0).contains(rate), "{seen:?}");
        }
        // The demand stops: 0 within two ticks.
        let stopped: Vec<f64> = (11..15).map(|tick| read(tick, 0)).collect();
        assert_eq!(stopped[1], 0.0, "{stopped:?}");
        // It comes back: within three ticks.
        let back: Vec<f64> = (15..18).map(|tick| read(tick, 10)).collect();
        assert!((90.0..=110.0).contains(&back[2]), "{back:?}");
    }

    #[test]
    fn a_sparse_demand_is_not_read_as_gone_when_a_few_ticks_bring_nothing() {
        let mut read = ticks();
        // 3.3 units a second: a unit every third tick, then two ticks without one.
        let seen: Vec<f64> = [1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0]
            .into_iter()
            .zip(1..)
            .map(|(units, tick)| read(tick, units))
            .collect();
        // From the fourth reading on, never none: the rate over the last ten ticks.
        for rate in &seen[3..] {
            assert!((2.0..=5.0).contains(rate), "{seen:?}");
        }
    }

    #[test]
    fn the_rate_runs_on_across_a_window_s_start() {
        let window = Window::at(10_000_000, 1_000_000);
        let mut rate = AskRate::default();
        for tick in 1..=5 {
            rate.read(
                window,
                tick * 10,
                window.start_us() + tick * TICK,
                None,
                (0, TICK),
            );
        }
        let next = window.next();
        assert_eq!(rate.crossing(next), Some(window));
        assert_eq!(rate.crossing(next.next()), None);
        // Read last at 500 ms with 50 asked, the window ended with 100, and 10 were asked in
        // the next one's first 100 ms: 100 a second, not 10 over the 600 ms since the last
        // reading.
        let read = rate.read(next, 10, next.start_us() + TICK, Some(100), (0, TICK)) * 1e6;
        assert!((read - 100.0).abs() < 1e-6, "{read}");
    }

    #[test]
    fn a_first_reading_counts_since_first_asked_and_is_not_kept() {
        let window = Window::at(10_000_000, 1_000_000);
        let start = window.start_us() + 500_000;
        let mut rate = AskRate::default();
        // Asked 5 units 20 ms after first asked: over a tick, 50 a second.
        let first = rate.read(window, 5, start + 20_000, None, (start, TICK)) * 1e6;
        assert!((first - 50.0).abs() < 1e-6, "{first}");
        // The next reading: 10 over the tick since, 100 a second.
        let next = rate.read(window, 15, start + 120_000, None, (start, TICK)) * 1e6;
        assert!((next - 100.0).abs() < 1e-6, "{next}");
    }
}
