//! Tests of the sliding window counter's steps: its estimate, rounding, waits and state.

use super::*;
use crate::algorithm::testing::{OneKey, SECOND, T0};
use crate::algorithm::{Algorithm, State as RuleState};
use crate::quota::Quota;

/// A key under a sliding window of `quota` in `sub_intervals`.
fn counter(quota: Quota, sub_intervals: u16) -> OneKey {
    OneKey::new(Algorithm::SlidingWindow { sub_intervals }, quota)
}

/// The counts the key's window holds.
fn window(key: &OneKey) -> &State {
    match &key.state {
        Some(RuleState::SlidingWindow(window)) => window,
        other => panic!("expected a sliding window, got {other:?}"),
    }
}

/// A key whose window holds what `add` leaves.
fn holding(add: Add) -> Option<RuleState> {
    Some(Write::Window(add).into_state())
}

#[test]
fn one_sub_interval_weighs_the_previous_window_by_its_overlap() {
    // Cloudflare's example: 10 per minute.
    let mut counter = counter(Quota::per_minute(10), 1);
    assert_eq!(counter.request(T0, 8).outcome, Outcome::Allowed);
    // 15 s into the next minute, 3/4 of the previous one still overlaps: ceil(8 * 0.75) = 6.
    let now = T0 + 75 * SECOND;
    let peek = counter.request(now, 0);
    assert_eq!((peek.used, peek.remaining), (6, 4));
    assert_eq!(counter.request(now, 4).outcome, Outcome::Allowed);
    let denied = counter.request(now, 1);
    assert_eq!(denied.outcome, Outcome::Denied);
    // 4 in this minute and 1 to spare: 8 * weight <= 5 once only 5/8 of the previous minute
    // overlaps, 22.5 s into this one: 7.5 s from now.
    assert_eq!(denied.retry_after_us, 7_500_000);
    assert_eq!(counter.request(now + 7_499_999, 1).outcome, Outcome::Denied);
    assert_eq!(
        counter.request(now + 7_500_000, 1).outcome,
        Outcome::Allowed
    );
}

#[test]
fn sub_intervals_slide_out_one_by_one() {
    // 4 per second in 4 sub-intervals of 250 ms.
    let mut counter = counter(Quota::per_second(4), 4);
    for quarter in 0..4 {
        let now = T0 + i64::from(quarter) * 250_000;
        assert_eq!(counter.request(now, 1).outcome, Outcome::Allowed);
    }
    let now = T0 + 900_000;
    let denied = counter.request(now, 1);
    assert_eq!((denied.used, denied.remaining), (4, 0));
    // At T0 + 1 s the first quarter becomes the trailing one at weight 1; it weighs
    // ceil(1 * (250_000 - r) / 250_000), which is 0 only at r = 250_000: at T0 + 1.25 s.
    assert_eq!(denied.retry_after_us, 350_000);
    assert_eq!(denied.full_after_us, 2_000_000 - 900_000);
    let cost_two = counter.request(now, 2);
    assert_eq!(cost_two.retry_after_us, 600_000);
}

#[test]
fn costs_beyond_the_limit_never_pass_and_peeks_write_nothing() {
    let mut counter = counter(Quota::per_second(4), 2);
    let never = counter.request(T0, 5);
    assert_eq!((never.outcome, never.retry_after_us), (Outcome::Never, 0));
    counter.assert_peek_writes_nothing(4);
}

#[test]
fn a_billion_a_day_uses_coarser_exact_steps() {
    let mut counter = counter(Quota::per_day(1_000_000_000), 1);
    let params = counter.params;
    let Geometry {
        size,
        quantum,
        steps,
    } = params.window;
    assert_eq!((size, quantum, steps), (params.period, 19_185, 4_503_519));
    assert!(params.limit * steps <= WEIGHT_RANGE);
    assert_eq!(counter.request(T0, 1_000_000_000).outcome, Outcome::Allowed);
    // Half a day into the next day, half still counts, and a step of 19_185 µs more: the
    // elapsed time is rounded down to 2_251_759 steps of 4_503_519, so the estimate is
    // ceil(10^9 * 2_251_760 / 4_503_519), 112 above the exact half, never below it.
    let half = counter.request(T0 + 3 * 86_400 * SECOND / 2, 0);
    assert_eq!(half.used, 500_000_112);
}

#[test]
fn counts_far_above_a_lowered_limit_are_weighted_as_the_scripts_doubles_do() {
    // 4e9 counted a day ago under a far higher limit, read by 10^5 a day: 10^5 * 86_400 s is
    // past 2^52 µs, so the steps are of 2 µs, 4.32e10 of them, and the trailing count times
    // the steps left passes 2^53 (and an i64). The script's product rounds there.
    let mut counter = counter(Quota::per_day(100_000), 1);
    let Geometry {
        size,
        quantum,
        steps,
    } = counter.params.window;
    assert_eq!((quantum, steps), (2, 43_200_000_000));
    counter.state = holding(Add {
        index: T0 / size,
        cost: 4_000_000_000,
        replace: false,
        slots: 2,
    });
    // A third of a day into the next: two thirds of the steps are left.
    let now = T0 + size + size / 3;
    let left = steps - floor_div(size / 3, quantum);
    assert!(4_000_000_000_i64.checked_mul(left).is_none());
    // `ceil_div(trailing * left, steps)` in lua/common.lua, on doubles.
    let (product, steps) = (4e9 * left as f64, steps as f64);
    let mut expected = (product / steps).ceil();
    if expected > 0.0 && (expected - 1.0) * steps >= product {
        expected -= 1.0;
    } else if expected * steps < product {
        expected += 1.0;
    }
    let peek = counter.request(now, 0);
    assert_eq!(
        (peek.outcome, peek.used, peek.remaining),
        (Outcome::Denied, expected as u64, 0)
    );
    assert_eq!(peek.used, 2_666_666_667);
}

#[test]
fn a_clock_behind_the_counts_evaluates_at_the_newest_sub_interval() {
    let mut counter = counter(Quota::per_second(2), 2);
    counter.request(T0 + SECOND, 1);
    let behind = counter.request(T0, 1);
    assert_eq!(behind.outcome, Outcome::Allowed);
    assert_eq!(behind.full_after_us, 2_500_000);
    let state = window(&counter);
    assert_eq!(state.count(state.newest), 2);
}

#[test]
fn counts_more_than_a_period_ahead_are_foreign_and_replaced() {
    // 5 per hour in 60 sub-intervals of a minute, holding what 3 per minute in sub-intervals
    // of a second left: 3 in the second-index of T0, which as a minute-index lies ~1.7e9
    // minutes ahead.
    let mut counter = counter(Quota::per_hour(5), 60);
    let seconds = T0 / SECOND;
    counter.state = holding(Add {
        index: seconds,
        cost: 3,
        replace: false,
        slots: 61,
    });
    let allowed = counter.request(T0 + SECOND, 2);
    assert_eq!(
        (allowed.outcome, allowed.remaining, allowed.used),
        (Outcome::Allowed, 3, 2)
    );
    // 61 minutes from the start of the current one, not ~1e17 µs.
    assert_eq!(allowed.full_after_us, 61 * 60 * 1_000_000 - 1_000_000);
    let state = window(&counter);
    assert_eq!(state.newest, floor_div(T0 + SECOND, 60 * SECOND));
    assert_eq!(
        state.counts.iter().sum::<u32>(),
        2,
        "nothing foreign is kept"
    );
}

#[test]
fn no_wait_exceeds_two_periods_and_a_sub_interval_whatever_lies_ahead() {
    // 2 per second in 4 sub-intervals of 250 ms, full in a sub-interval `ahead` of now.
    let size = 250_000;
    for ahead in 0..=12 {
        let mut counter = counter(Quota::per_second(2), 4);
        counter.request(T0 + i64::from(ahead) * size, 2);
        for verdict in [counter.request(T0, 1), counter.request(T0, 0)] {
            assert!(verdict.full_after_us <= 9 * 250_000, "{ahead}: {verdict:?}");
            assert!(
                verdict.retry_after_us <= 9 * 250_000,
                "{ahead}: {verdict:?}"
            );
        }
        let step = crate::algorithm::step(&counter.params, counter.state.as_ref(), T0, 1);
        if let Some((_, ttl)) = step.write {
            assert!(ttl <= 9 * 250_000, "{ahead}: TTL {ttl}");
        }
    }
}

#[test]
fn ring_sums_add_up_the_counts_in_range_wherever_the_ring_wraps() {
    for slots in [1, 2, 5, 61] {
        for newest in [0, 3, 59, 60, 61, 1_000_003] {
            let mut window = Add {
                index: newest - slots as i64 + 1,
                cost: 1,
                replace: false,
                slots,
            }
            .into_window();
            for (step, index) in (newest - slots as i64 + 2..=newest).enumerate() {
                Add {
                    index,
                    cost: step as u32 + 2,
                    replace: false,
                    slots,
                }
                .apply(&mut window);
            }
            let ring = window.ring();
            for index in newest - 70..=newest + 2 {
                let live = index > newest - slots as i64 && index <= newest;
                let expected = if live {
                    i64::from(window.counts[index.rem_euclid(slots as i64) as usize])
                } else {
                    0
                };
                assert_eq!(ring.count(index), expected, "{slots} {newest} {index}");
            }
            for from in newest - 70..=newest + 2 {
                for to in from - 1..=newest + 2 {
                    let one_by_one: i64 = (from..=to).map(|index| ring.count(index)).sum();
                    assert_eq!(
                        ring.sum(from, to),
                        one_by_one,
                        "{slots} {newest} {from} {to}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_ring_forgets_sub_intervals_that_slid_out() {
    let mut counter = counter(Quota::per_second(10), 2);
    counter.request(T0, 3);
    counter.request(T0 + 500_000, 2);
    counter.request(T0 + 1_500_000, 1);
    let state = window(&counter);
    assert_eq!(state.count(state.newest), 1);
    assert_eq!(state.count(state.newest - 1), 0);
    assert_eq!(state.count(state.newest - 2), 2);
    assert_eq!(state.count(state.newest - 3), 0, "out of the ring");
}
