//! Property tests: random quotas and random traces of requests (arrival times, costs) for every
//! algorithm.
//!
//! - The `MemoryStore` and the `RedisStore` give identical decisions, also when the clock goes
//!   back.
//! - While time runs forward, both give the decision of a brute-force reference model written
//!   here independently of the crate: exact integer arithmetic in `u128`, no scaling tricks (the
//!   log model keeps every admitted time forever, the window model recounts its sub-intervals
//!   from the full history and searches for the retry time instead of computing it, the bucket
//!   model counts tokens in units of 1/period of the unreduced quota).
//! - A policy of several rules of random algorithms is all or nothing.
//!
//! One `redis-server` serves every test of this file (each test uses its own key prefix and a
//! fresh client key per case).

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::FutureExt;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use support::RedisServer;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{
    Decision, MAX_PERIOD, MemoryStore, Outcome, Policy, Quota, RedisStore, Rule, RuleVerdict, Store,
};

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const MS: u64 = 1_000;
const S: u64 = 1_000_000;
const DAY: u64 = 86_400 * S;
const TEN_YEARS: u64 = MAX_PERIOD.as_micros() as u64;
/// Traces stay within a century of `T0`: times are µs in Lua numbers, exact up to 2^53 µs (the
/// year 2255), and a trace of ten-year steps would get there.
const LATEST: u64 = T0 + 100 * 365 * DAY;
/// The crate's documented bound for a sliding window's weights: `limit * steps <= 2^52`.
const WEIGHT_RANGE: u64 = 1 << 52;

// ---- The reference models -----------------------------------------------------------------

/// A rule's reference model: what it says about a request, and what admitting one changes.
trait Model {
    fn verdict(&self, now: u64, cost: u64) -> RuleVerdict;
    fn admit(&mut self, now: u64, cost: u64);
}

fn verdict(outcome: Outcome, remaining: u128, used: u128, reset: u128, retry: u128) -> RuleVerdict {
    let us = |value: u128| Duration::from_micros(u64::try_from(value).expect("fits"));
    RuleVerdict::new(
        outcome,
        u64::try_from(remaining).expect("fits"),
        u64::try_from(used).expect("fits"),
        us(reset),
        us(retry),
    )
}

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

/// A window of `period` from the key's first request after the previous window.
struct FixedWindowModel {
    limit: u128,
    period: u128,
    window: Option<(u128, u128)>,
}

impl FixedWindowModel {
    fn current(&self, now: u128) -> (u128, u128) {
        match self.window {
            Some((start, used)) if now < start + self.period => (start, used),
            _ => (now, 0),
        }
    }
}

impl Model for FixedWindowModel {
    fn verdict(&self, now: u64, cost: u64) -> RuleVerdict {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let (start, used) = self.current(now);
        let reset = start + self.period - now;
        let room = self.limit.saturating_sub(used);
        if cost > self.limit {
            verdict(Outcome::Never, room, used, reset, 0)
        } else if used + cost > self.limit {
            verdict(Outcome::Denied, room, used, reset, reset)
        } else {
            verdict(Outcome::Allowed, room - cost, used + cost, reset, 0)
        }
    }

    fn admit(&mut self, now: u64, cost: u64) {
        let (start, used) = self.current(u128::from(now));
        self.window = Some((start, used + u128::from(cost)));
    }
}

/// Every admitted unit's time, forever; a unit counts while `now - period < t`.
struct LogModel {
    limit: u128,
    period: u128,
    admitted: Vec<u128>,
}

impl Model for LogModel {
    fn verdict(&self, now: u64, cost: u64) -> RuleVerdict {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let mut in_window: Vec<u128> = self
            .admitted
            .iter()
            .copied()
            .filter(|&t| t + self.period > now)
            .collect();
        in_window.sort_unstable();
        let count = in_window.len() as u128;
        let reset = in_window.last().map_or(0, |&t| t + self.period - now);
        let room = self.limit.saturating_sub(count);
        if cost > self.limit {
            verdict(Outcome::Never, room, count, reset, 0)
        } else if count + cost > self.limit {
            let must_leave = (count + cost - self.limit) as usize;
            let retry = in_window[must_leave - 1] + self.period - now;
            verdict(Outcome::Denied, room, count, reset, retry)
        } else {
            let reset = if cost > 0 {
                reset.max(self.period)
            } else {
                reset
            };
            verdict(Outcome::Allowed, room - cost, count + cost, reset, 0)
        }
    }

    fn admit(&mut self, now: u64, cost: u64) {
        self.admitted
            .extend(std::iter::repeat_n(u128::from(now), cost as usize));
    }
}

/// Every admitted request `(time, cost)`; sub-interval counts are recomputed from them.
struct WindowModel {
    limit: u128,
    n: u128,
    size: u128,
    /// The weight's step: the smallest that keeps `limit * steps` within 2^52.
    quantum: u128,
    steps: u128,
    admitted: Vec<(u128, u128)>,
}

impl WindowModel {
    fn new(limit: u64, period: u64, n: u64) -> Self {
        let size = u128::from(period / n);
        let quantum = ceil_div(size, u128::from(WEIGHT_RANGE / limit));
        let steps = ceil_div(size, quantum);
        assert!(u128::from(limit) * steps <= u128::from(WEIGHT_RANGE));
        WindowModel {
            limit: u128::from(limit),
            n: u128::from(n),
            size,
            quantum,
            steps,
            admitted: Vec::new(),
        }
    }

    fn counts(&self) -> BTreeMap<u128, u128> {
        let mut counts = BTreeMap::new();
        for &(time, cost) in &self.admitted {
            *counts.entry(time / self.size).or_default() += cost;
        }
        counts
    }

    /// The estimate in sub-interval `current`, `elapsed` steps in, times `steps`: the sum of the
    /// sub-intervals fully in the window plus the trailing one's overlapping fraction.
    fn scaled_estimate(&self, counts: &BTreeMap<u128, u128>, current: u128, elapsed: u128) -> u128 {
        let full: u128 = counts
            .range((current + 1).saturating_sub(self.n)..=current)
            .map(|(_, &count)| count)
            .sum();
        let trailing = current
            .checked_sub(self.n)
            .and_then(|index| counts.get(&index))
            .copied()
            .unwrap_or(0);
        full * self.steps + trailing * (self.steps - elapsed)
    }

    fn fits(
        &self,
        counts: &BTreeMap<u128, u128>,
        current: u128,
        elapsed: u128,
        cost: u128,
    ) -> bool {
        self.scaled_estimate(counts, current, elapsed) + cost * self.steps
            <= self.limit * self.steps
    }
}

impl Model for WindowModel {
    fn verdict(&self, now: u64, cost: u64) -> RuleVerdict {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let counts = self.counts();
        let current = now / self.size;
        let elapsed = (now % self.size) / self.quantum;
        let used = ceil_div(self.scaled_estimate(&counts, current, elapsed), self.steps);
        let reset = counts
            .keys()
            .next_back()
            .filter(|&&newest| newest + self.n >= current)
            .map_or(0, |&newest| (newest + self.n + 1) * self.size - now);
        let room = self.limit.saturating_sub(used);
        if cost > self.limit {
            return verdict(Outcome::Never, room, used, reset, 0);
        }
        if !self.fits(&counts, current, elapsed, cost) {
            // Search each sub-interval from now on for the first step at which the request fits
            // (the estimate never rises while nothing is admitted).
            for index in current..=current + self.n + 1 {
                let mut low = if index == current { elapsed } else { 0 };
                let mut high = self.steps - 1;
                if low > high || !self.fits(&counts, index, high, cost) {
                    continue;
                }
                while low < high {
                    let mid = (low + high) / 2;
                    if self.fits(&counts, index, mid, cost) {
                        high = mid;
                    } else {
                        low = mid + 1;
                    }
                }
                let at = index * self.size + low * self.quantum;
                return verdict(Outcome::Denied, room, used, reset, at - now);
            }
            panic!("a request of cost {cost} <= limit never fits");
        }
        let reset = if cost > 0 {
            (current + self.n + 1) * self.size - now
        } else {
            reset
        };
        verdict(
            Outcome::Allowed,
            self.limit.saturating_sub(used + cost),
            used + cost,
            reset,
            0,
        )
    }

    fn admit(&mut self, now: u64, cost: u64) {
        self.admitted.push((u128::from(now), u128::from(cost)));
    }
}

/// Tokens, counted in units of 1/period of a token: `burst * period` when full, refilled at
/// `limit` units per µs. Both the token bucket and GCRA must behave like it.
struct BucketModel {
    limit: u128,
    period: u128,
    burst: u128,
    last: Option<(u128, u128)>,
}

impl BucketModel {
    fn capacity(&self) -> u128 {
        self.burst * self.period
    }

    fn tokens(&self, now: u128) -> u128 {
        match self.last {
            None => self.capacity(),
            Some((at, tokens)) => {
                (tokens + now.saturating_sub(at) * self.limit).min(self.capacity())
            }
        }
    }

    /// remaining, used, reset for a bucket holding `tokens`.
    fn report(&self, tokens: u128) -> (u128, u128, u128) {
        let missing = self.capacity() - tokens;
        (
            tokens / self.period,
            ceil_div(missing, self.period),
            ceil_div(missing, self.limit),
        )
    }
}

impl Model for BucketModel {
    fn verdict(&self, now: u64, cost: u64) -> RuleVerdict {
        let (now, cost) = (u128::from(now), u128::from(cost));
        let tokens = self.tokens(now);
        let (remaining, used, reset) = self.report(tokens);
        let need = cost * self.period;
        if cost > self.burst {
            verdict(Outcome::Never, remaining, used, reset, 0)
        } else if need > tokens {
            let retry = ceil_div(need - tokens, self.limit);
            verdict(Outcome::Denied, remaining, used, reset, retry)
        } else {
            let (remaining, used, reset) = self.report(tokens - need);
            verdict(Outcome::Allowed, remaining, used, reset, 0)
        }
    }

    fn admit(&mut self, now: u64, cost: u64) {
        let now = u128::from(now);
        let tokens = self.tokens(now) - u128::from(cost) * self.period;
        self.last = Some((now, tokens));
    }
}

// ---- Rules and traces ---------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Algo {
    FixedWindow,
    SlidingLog,
    SlidingWindow(u16),
    TokenBucket,
    Gcra,
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    algo: Algo,
    limit: u32,
    period_us: u64,
    burst: u32,
}

impl Spec {
    fn rule(&self, name: String) -> Rule {
        let quota = Quota::new(self.limit, Duration::from_micros(self.period_us));
        match self.algo {
            Algo::FixedWindow => Rule::fixed_window(name, quota),
            Algo::SlidingLog => Rule::sliding_log(name, quota),
            Algo::SlidingWindow(n) => Rule::sliding_window(name, quota, n),
            Algo::TokenBucket => Rule::token_bucket(name, quota.with_burst(self.burst)),
            Algo::Gcra => Rule::gcra(name, quota.with_burst(self.burst)),
        }
    }

    fn model(&self) -> Box<dyn Model> {
        let (limit, period) = (u128::from(self.limit), u128::from(self.period_us));
        match self.algo {
            Algo::FixedWindow => Box::new(FixedWindowModel {
                limit,
                period,
                window: None,
            }),
            Algo::SlidingLog => Box::new(LogModel {
                limit,
                period,
                admitted: Vec::new(),
            }),
            Algo::SlidingWindow(n) => Box::new(WindowModel::new(
                u64::from(self.limit),
                self.period_us,
                u64::from(n),
            )),
            Algo::TokenBucket | Algo::Gcra => Box::new(BucketModel {
                limit,
                period,
                burst: u128::from(self.burst),
                last: None,
            }),
        }
    }

    /// The most a request can cost and still pass.
    fn capacity(&self) -> u32 {
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

fn fixed_window() -> impl Strategy<Value = Spec> {
    (limit(20), period()).prop_map(|(limit, period_us)| Spec {
        algo: Algo::FixedWindow,
        limit,
        period_us,
        burst: limit,
    })
}

fn sliding_log() -> impl Strategy<Value = Spec> {
    let limit = prop_oneof![9 => 1..=30u32, 1 => Just(10_000u32)];
    (limit, period()).prop_map(|(limit, period_us)| Spec {
        algo: Algo::SlidingLog,
        limit,
        period_us,
        burst: limit,
    })
}

fn sliding_window() -> impl Strategy<Value = Spec> {
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

fn bucket(algo: Algo) -> impl Strategy<Value = Spec> {
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
fn trace(specs: &[Spec]) -> impl Strategy<Value = Vec<(i64, u32)>> + use<> {
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

// ---- Running a trace on both stores -------------------------------------------------------

/// One Redis server for the whole file: started by the first test that needs it, stopped when
/// the last one still running lets go of it.
fn shared_server() -> Arc<RedisServer> {
    static SERVER: Mutex<Weak<RedisServer>> = Mutex::new(Weak::new());
    let mut slot = SERVER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let server = Arc::new(RedisServer::start());
    *slot = Arc::downgrade(&server);
    server
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    clock: ManualClock,
    memory: MemoryStore,
    redis: RedisStore,
    cases: AtomicU64,
    _server: Arc<RedisServer>,
}

impl Harness {
    fn new(prefix: &str) -> Self {
        let server = shared_server();
        let clock = ManualClock::new(T0);
        Harness {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            redis: RedisStore::builder(&server.url())
                .prefix(prefix)
                .clock(clock.clone())
                .build()
                .unwrap(),
            clock,
            cases: AtomicU64::new(0),
            _server: server,
        }
    }

    /// Runs a trace on both stores (and the models while time runs forward), from `start`.
    fn run(&self, specs: &[Spec], start: u64, trace: &[(i64, u32)]) -> Result<(), TestCaseError> {
        let names = (0..specs.len()).map(|index| format!("r{index}"));
        let policy = Policy::new(specs.iter().zip(names).map(|(spec, name)| spec.rule(name)))
            .map_err(|err| TestCaseError::fail(format!("policy: {err}")))?;
        let mut models: Vec<Box<dyn Model>> = specs.iter().map(Spec::model).collect();
        // A fresh client key per case (shrinking reruns cases), so no case sees another's state.
        let key = Key::from(format!(
            "case-{}",
            self.cases.fetch_add(1, Ordering::Relaxed)
        ));
        let mut now = start;
        let mut forward = true;
        for (index, &(advance, cost)) in trace.iter().enumerate() {
            forward &= advance >= 0;
            now = now.saturating_add_signed(advance).clamp(T0, LATEST);
            self.clock.set(now);
            // Asked outside the runtime, the memory store starts no background sweep: a sweep
            // in real time would drop state by the manual clock, which here also goes back.
            let memory = self
                .memory
                .check(&key, &policy, cost)
                .now_or_never()
                .expect("the memory store answers at once")
                .unwrap();
            let redis = self
                .runtime
                .block_on(self.redis.check(&key, &policy, cost))
                .unwrap();
            let offset = i128::from(now) - i128::from(start);
            prop_assert_eq!(
                &memory,
                &redis,
                "request {} (cost {}, at {:+} µs): memory and Redis disagree",
                index,
                cost,
                offset
            );
            if forward {
                let cost = u64::from(cost);
                let verdicts: Vec<RuleVerdict> = models
                    .iter()
                    .map(|model| model.verdict(now, cost))
                    .collect();
                let expected = Decision::from_verdicts(&policy, &verdicts);
                prop_assert_eq!(
                    &redis,
                    &expected,
                    "request {} (cost {}, at {:+} µs): the stores and the model disagree",
                    index,
                    cost,
                    offset
                );
                if expected.is_allowed() && cost > 0 {
                    for model in &mut models {
                        model.admit(now, cost);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs `cases` random traces for rules drawn from `specs`.
fn check(name: &str, cases: u32, specs: impl Strategy<Value = Vec<Spec>>) {
    let harness = Harness::new(name);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let cases = specs.prop_flat_map(|specs| {
        let start = T0..T0 + 365 * DAY;
        let trace = trace(&specs);
        (Just(specs), start, trace)
    });
    let result = TestRunner::new(config).run(&cases, |(specs, start, trace)| {
        harness.run(&specs, start, &trace)
    });
    if let Err(err) = result {
        panic!("{name}: {err}");
    }
}

#[test]
fn fixed_window_matches_its_model_on_both_stores() {
    check("fw", 96, fixed_window().prop_map(|spec| vec![spec]));
}

#[test]
fn sliding_log_matches_its_model_on_both_stores() {
    check("log", 96, sliding_log().prop_map(|spec| vec![spec]));
}

#[test]
fn sliding_window_matches_its_model_on_both_stores() {
    check("sw", 128, sliding_window().prop_map(|spec| vec![spec]));
}

#[test]
fn token_bucket_matches_the_bucket_model_on_both_stores() {
    check(
        "tb",
        96,
        bucket(Algo::TokenBucket).prop_map(|spec| vec![spec]),
    );
}

#[test]
fn gcra_matches_the_bucket_model_on_both_stores() {
    check("gcra", 96, bucket(Algo::Gcra).prop_map(|spec| vec![spec]));
}

#[test]
fn policies_of_several_algorithms_are_all_or_nothing_on_both_stores() {
    let any = prop_oneof![
        fixed_window(),
        sliding_log(),
        sliding_window(),
        bucket(Algo::TokenBucket),
        bucket(Algo::Gcra),
    ];
    check("multi", 64, proptest::collection::vec(any, 2..=3));
}
