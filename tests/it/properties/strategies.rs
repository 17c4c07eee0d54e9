//! Random rules of every algorithm, and random traces of requests scaled to them.

use std::time::Duration;

use super::{DAY, MS, S, TEN_YEARS};
use proptest::prelude::*;
use tower_redis_ratelimit::{Policy, Quota, Rule};

#[derive(Clone, Copy, Debug)]
pub(super) enum Algo {
    FixedWindow,
    SlidingLog,
    SlidingWindow(u16),
    TokenBucket,
    Gcra,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Spec {
    pub(super) algo: Algo,
    pub(super) limit: u32,
    pub(super) period_us: u64,
    pub(super) burst: u32,
}

impl Spec {
    pub(super) fn rule(&self, name: String) -> Rule {
        let quota = Quota::new(self.limit, Duration::from_micros(self.period_us));
        match self.algo {
            Algo::FixedWindow => Rule::fixed_window(name, quota),
            Algo::SlidingLog => Rule::sliding_log(name, quota),
            Algo::SlidingWindow(n) => Rule::sliding_window(name, quota, n),
            Algo::TokenBucket => Rule::token_bucket(name, quota.with_burst(self.burst)),
            Algo::Gcra => Rule::gcra(name, quota.with_burst(self.burst)),
        }
    }

    pub(super) fn sub_intervals(&self) -> u64 {
        match self.algo {
            Algo::SlidingWindow(n) => u64::from(n),
            _ => 1,
        }
    }

    /// The most a request can cost and still pass.
    pub(super) fn capacity(&self) -> u32 {
        match self.algo {
            Algo::TokenBucket | Algo::Gcra => self.burst,
            _ => self.limit,
        }
    }

    /// The time one unit takes to come back, roughly.
    fn interval(&self) -> u64 {
        (self.period_us / u64::from(self.limit)).max(1)
    }
}

fn period() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(100 * MS),
        Just(S),
        Just(10 * S),
        Just(60 * S),
        Just(3_600 * S),
        Just(DAY),
        Just(TEN_YEARS),
        MS..=10 * S,
    ]
}

fn limit(max_small: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => 1..=max_small,
        2 => 1..=100_000u32,
        1 => Just(1_000_000_000u32),
        1 => Just(u32::MAX),
    ]
}

pub(super) fn fixed_window() -> impl Strategy<Value = Spec> {
    (limit(20), period()).prop_map(|(limit, period_us)| Spec {
        algo: Algo::FixedWindow,
        limit,
        period_us,
        burst: limit,
    })
}

pub(super) fn sliding_log() -> impl Strategy<Value = Spec> {
    let limit = prop_oneof![9 => 1..=30u32, 1 => Just(10_000u32)];
    (limit, period()).prop_map(|(limit, period_us)| Spec {
        algo: Algo::SlidingLog,
        limit,
        period_us,
        burst: limit,
    })
}

pub(super) fn sliding_window() -> impl Strategy<Value = Spec> {
    let sub_intervals = prop_oneof![Just(1u16), 1..=100u16];
    let size = prop_oneof![
        10..=10_000u64,
        (1..=10_000u64).prop_map(|ms| ms * MS),
        Just(DAY)
    ];
    (limit(20), sub_intervals, size)
        .prop_filter("a period of 1 ms to 10 years", |&(_, n, size)| {
            (MS..=TEN_YEARS).contains(&(u64::from(n) * size))
        })
        .prop_map(|(limit, n, size)| Spec {
            algo: Algo::SlidingWindow(n),
            limit,
            period_us: u64::from(n) * size,
            burst: limit,
        })
}

pub(super) fn bucket(algo: Algo) -> impl Strategy<Value = Spec> {
    (limit(20), period(), 0..3u8, 1..=40u32)
        .prop_map(move |(limit, period_us, burst_kind, small)| Spec {
            algo,
            limit,
            period_us,
            burst: match burst_kind {
                0 => limit,
                1 => small,
                _ => limit.saturating_mul(2),
            },
        })
        // A burst too large to count exactly is a configuration error (tested elsewhere).
        .prop_filter("a quota the bucket can count exactly", |spec| {
            Policy::try_from(spec.rule("r".into())).is_ok()
        })
}

/// `(advance in µs, cost)` per request, scaled to the rules. In a quarter of the traces the clock
/// sometimes goes back (a negative advance).
pub(super) fn trace(specs: &[Spec]) -> impl Strategy<Value = Vec<(i64, u32)>> + use<> {
    let interval = specs.iter().map(Spec::interval).min().unwrap_or(1);
    let period = specs.iter().map(|spec| spec.period_us).max().unwrap_or(S);
    let capacity = specs.iter().map(Spec::capacity).min().unwrap_or(1);
    let as_signed = |us: u64| i64::try_from(us).unwrap_or(i64::MAX);
    let (interval, period) = (as_signed(interval), as_signed(period));
    let forward = prop_oneof![
        3 => Just(0i64),
        6 => 0..=2 * interval,
        2 => 0..=period,
        1 => 0..=period.saturating_mul(3),
    ];
    let cost = prop_oneof![
        6 => Just(1u32),
        2 => Just(0u32),
        3 => 0..=capacity,
        1 => capacity.saturating_add(1)..=capacity.saturating_add(3),
    ];
    proptest::bool::weighted(0.25).prop_flat_map(move |goes_back| {
        let advance = if goes_back {
            prop_oneof![6 => forward.clone(), 1 => -period..0].boxed()
        } else {
            forward.clone().boxed()
        };
        proptest::collection::vec((advance, cost.clone()), 1..40)
    })
}
