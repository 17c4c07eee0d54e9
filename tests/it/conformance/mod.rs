//! The conformance suite: one table of scenarios, per algorithm and edge case, run against the
//! `MemoryStore` and the `RedisStore` on one `ManualClock` (the Redis script then takes the
//! caller's time instead of reading `TIME`).
//!
//! Every request of every scenario must get the same `Decision` from both stores, and that
//! decision must be the one the table states (outcome, remaining, used, reset_after, retry_after,
//! and for multi-rule policies which rule is reported). On Redis, each request is also checked for
//! what it does to the data: a request that is not admitted with a cost (a denial, a request that
//! can never pass, a cost-0 peek) writes nothing, every key written carries a TTL, and the keys
//! written are exactly `RedisStore::state_keys`.
//!
//! A second table changes a rule's quota under the same name between phases of requests, for every
//! algorithm, and holds both stores to the same decisions across the change.
//!
//! Arrival times are µs after `T0`, midnight UTC, so epoch-aligned sub-intervals of every size
//! used here start at `T0`. A time may be earlier than the one before: the clock went back.

use std::collections::BTreeSet;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{
    Decision, MAX_PERIOD, MemoryStore, Outcome, Policy, Quota, RedisStore, Rule, Store,
};

use crate::support::RedisServer;

/// 2023-11-14T00:00:00Z, in µs: a whole number of days.
const T0: u64 = 1_699_920_000_000_000;
const MS: u64 = 1_000;
const S: u64 = 1_000_000;
const MIN: u64 = 60 * S;
const DAY: u64 = 86_400 * S;
const TEN_YEARS: u64 = MAX_PERIOD.as_micros() as u64;
const BILLION: u32 = 1_000_000_000;

#[derive(Clone, Copy, Debug)]
enum Algo {
    FixedWindow,
    SlidingLog,
    SlidingWindow(u16),
    TokenBucket,
    Gcra,
}

/// A rule, in a form a `const` table can hold.
#[derive(Clone, Copy, Debug)]
struct RuleSpec {
    name: &'static str,
    algo: Algo,
    limit: u32,
    period_us: u64,
    burst: Option<u32>,
}

const fn rule(name: &'static str, algo: Algo, limit: u32, period_us: u64) -> RuleSpec {
    RuleSpec {
        name,
        algo,
        limit,
        period_us,
        burst: None,
    }
}

const fn bucket(algo: Algo, limit: u32, period_us: u64, burst: u32) -> RuleSpec {
    RuleSpec {
        name: "bucket",
        algo,
        limit,
        period_us,
        burst: Some(burst),
    }
}

impl RuleSpec {
    /// The longest a request's state can matter (µs): a full bucket's drain time, else the
    /// period. State further ahead of the clock than this is not the rule's own.
    fn span(&self) -> u64 {
        match self.algo {
            Algo::TokenBucket | Algo::Gcra => {
                let units = u128::from(self.capacity()) * u128::from(self.period_us);
                u64::try_from(units.div_ceil(u128::from(self.limit)))
                    .expect("a drain time in µs fits in a u64")
            }
            _ => self.period_us,
        }
    }

    /// What the rule can hold at once: the burst of a bucket, else the limit.
    fn capacity(&self) -> u32 {
        match self.algo {
            Algo::TokenBucket | Algo::Gcra => self.burst.unwrap_or(self.limit),
            _ => self.limit,
        }
    }

    fn rule(&self) -> Rule {
        let mut quota = Quota::new(self.limit, Duration::from_micros(self.period_us));
        if let Some(burst) = self.burst {
            quota = quota.with_burst(burst);
        }
        match self.algo {
            Algo::FixedWindow => Rule::fixed_window(self.name, quota),
            Algo::SlidingLog => Rule::sliding_log(self.name, quota),
            Algo::SlidingWindow(n) => Rule::sliding_window(self.name, quota, n),
            Algo::TokenBucket => Rule::token_bucket(self.name, quota),
            Algo::Gcra => Rule::gcra(self.name, quota),
        }
    }
}

/// One request and the decision it must get.
#[derive(Clone, Copy, Debug)]
struct Req {
    /// µs after `T0`.
    at: u64,
    cost: u32,
    outcome: Outcome,
    remaining: u64,
    used: u64,
    reset_after: u64,
    /// 0 unless denied.
    retry_after: u64,
    /// The reported rule (multi-rule policies).
    rule: usize,
}

const fn allow(at: u64, cost: u32, remaining: u64, used: u64, reset_after: u64) -> Req {
    Req {
        at,
        cost,
        outcome: Outcome::Allowed,
        remaining,
        used,
        reset_after,
        retry_after: 0,
        rule: 0,
    }
}

const fn deny(at: u64, cost: u32, remaining: u64, used: u64, reset: u64, retry: u64) -> Req {
    Req {
        at,
        cost,
        outcome: Outcome::Denied,
        remaining,
        used,
        reset_after: reset,
        retry_after: retry,
        rule: 0,
    }
}

const fn never(at: u64, cost: u32, remaining: u64, used: u64, reset_after: u64) -> Req {
    Req {
        at,
        cost,
        outcome: Outcome::Never,
        remaining,
        used,
        reset_after,
        retry_after: 0,
        rule: 0,
    }
}

impl Req {
    const fn reported(mut self, rule: usize) -> Req {
        self.rule = rule;
        self
    }
}

struct Scenario {
    name: &'static str,
    rules: &'static [RuleSpec],
    requests: &'static [Req],
}

// ---- Fixed window -------------------------------------------------------------------------

const FW: RuleSpec = rule("fw", Algo::FixedWindow, 5, 10 * S);

const FW_RESETS_AT_WINDOW_END: &[Req] = &[
    allow(0, 1, 4, 1, 10 * S),
    allow(2 * S, 4, 0, 5, 8 * S),
    deny(3 * S, 1, 0, 5, 7 * S, 7 * S),
    deny(10 * S - 1, 1, 0, 5, 1, 1),
    // The next window starts with this request.
    allow(10 * S, 1, 4, 1, 10 * S),
    allow(12 * S, 2, 2, 3, 8 * S),
];

const FW_NEVER_AND_PEEK: &[Req] = &[
    // A peek on no state: a window would start now. It writes nothing, so the next request
    // starts the window.
    allow(0, 0, 5, 0, 10 * S),
    allow(S, 3, 2, 3, 10 * S),
    never(2 * S, 6, 2, 3, 9 * S),
    allow(2 * S, 0, 2, 3, 9 * S),
    allow(2 * S, 2, 0, 5, 9 * S),
    // Still "never" when the window is full: no wait helps.
    never(2 * S, 6, 0, 5, 9 * S),
    deny(2 * S, 1, 0, 5, 9 * S, 9 * S),
];

const FW_100MS: &[Req] = &[
    allow(0, 3, 0, 3, 100 * MS),
    deny(50 * MS, 1, 0, 3, 50 * MS, 50 * MS),
    allow(100 * MS, 1, 2, 1, 100 * MS),
];

const FW_BILLION_A_DAY: &[Req] = &[
    allow(0, BILLION, 0, 1_000_000_000, DAY),
    deny(
        3_600 * S,
        1,
        0,
        1_000_000_000,
        DAY - 3_600 * S,
        DAY - 3_600 * S,
    ),
    never(3_600 * S, BILLION + 1, 0, 1_000_000_000, DAY - 3_600 * S),
    allow(DAY, 1, 999_999_999, 1, DAY),
];

const FW_CLOCK_BACK: &[Req] = &[
    allow(5 * S, 1, 4, 1, 10 * S),
    // Before the window's start: still that window, which ends 15 s later.
    allow(0, 1, 3, 2, 15 * S),
    allow(14 * S, 3, 0, 5, S),
    deny(S, 1, 0, 5, 14 * S, 14 * S),
];

const FW_CLOCK_FAR_BACK: &[Req] = &[
    allow(20 * S, 2, 3, 2, 10 * S),
    // A period before the window's start: still that window, which ends two periods later.
    allow(10 * S, 1, 2, 3, 20 * S),
    // A µs further back no window of this rule can start that late: the state is foreign, a
    // window starts now, and the one from 20 s is forgotten.
    allow(10 * S - 1, 1, 4, 1, 10 * S),
    allow(20 * S, 0, 5, 0, 10 * S),
];

// ---- Sliding log --------------------------------------------------------------------------

const LOG: RuleSpec = rule("log", Algo::SlidingLog, 3, 10 * S);

const LOG_SLIDES_ENTRY_BY_ENTRY: &[Req] = &[
    allow(0, 1, 2, 1, 10 * S),
    allow(2 * S, 1, 1, 2, 10 * S),
    allow(4 * S, 1, 0, 3, 10 * S),
    // The oldest entry leaves at 10 s; the newest at 14 s.
    deny(5 * S, 1, 0, 3, 9 * S, 5 * S),
    // A cost of 2 needs the two oldest gone: the second leaves at 12 s.
    deny(5 * S, 2, 0, 3, 9 * S, 7 * S),
    deny(10 * S - 1, 1, 0, 3, 4 * S + 1, 1),
    allow(10 * S, 1, 0, 3, 10 * S),
    deny(11 * S, 1, 0, 3, 9 * S, S),
];

const LOG_SAME_MICROSECOND: &[Req] = &[
    // Entries of one µs stay distinct (Redis members are numbered), within and across requests.
    allow(0, 1, 2, 1, 10 * S),
    allow(0, 1, 1, 2, 10 * S),
    allow(0, 1, 0, 3, 10 * S),
    deny(0, 1, 0, 3, 10 * S, 10 * S),
    allow(10 * S, 2, 1, 2, 10 * S),
    allow(10 * S, 1, 0, 3, 10 * S),
    deny(10 * S, 1, 0, 3, 10 * S, 10 * S),
];

const LOG_NEVER_AND_PEEK: &[Req] = &[
    // An empty log has its full limit: nothing to reset.
    allow(0, 0, 3, 0, 0),
    never(0, 4, 3, 0, 0),
    allow(S, 2, 1, 2, 10 * S),
    allow(3 * S, 0, 1, 2, 8 * S),
    never(3 * S, 4, 1, 2, 8 * S),
    allow(3 * S, 1, 0, 3, 10 * S),
];

const LOG_100MS: &[Req] = &[
    allow(0, 1, 1, 1, 100 * MS),
    allow(30 * MS, 1, 0, 2, 100 * MS),
    deny(60 * MS, 1, 0, 2, 70 * MS, 40 * MS),
    // The entry at 0 is out (an entry counts while now - period < t).
    allow(100 * MS, 1, 0, 2, 100 * MS),
    deny(130 * MS - 1, 1, 0, 2, 70 * MS + 1, 1),
];

const LOG_TEN_THOUSAND_A_DAY: &[Req] = &[
    // 10,000 entries in one request: the script adds them in batches.
    allow(0, 10_000, 0, 10_000, DAY),
    deny(3_600 * S, 1, 0, 10_000, DAY - 3_600 * S, DAY - 3_600 * S),
    never(3_600 * S, 10_001, 0, 10_000, DAY - 3_600 * S),
    allow(DAY, 1, 9_999, 1, DAY),
];

const LOG_CLOCK_BACK: &[Req] = &[
    allow(5 * S, 1, 2, 1, 10 * S),
    // The entry at 5 s is "in the future": it counts, and leaves 15 s from now.
    allow(0, 1, 1, 2, 15 * S),
    allow(0, 1, 0, 3, 15 * S),
    deny(0, 1, 0, 3, 15 * S, 10 * S),
];

const LOG_CLOCK_FAR_BACK: &[Req] = &[
    allow(20 * S, 2, 1, 2, 10 * S),
    // The newest entry a period ahead still counts.
    allow(10 * S, 0, 1, 2, 20 * S),
    // A µs further back it cannot be this rule's: the log counts as empty and is replaced.
    allow(10 * S - 1, 1, 2, 1, 10 * S),
    allow(20 * S, 0, 3, 0, 0),
];

// ---- Sliding window counter ---------------------------------------------------------------

const SW_ONE_SUB_INTERVAL: &[Req] = &[
    // 10 per minute, Cloudflare's weighted previous window.
    allow(0, 8, 2, 8, 2 * MIN),
    // 15 s into the next minute 3/4 of the previous one overlaps: ceil(8 * 3/4) = 6.
    allow(75 * S, 0, 4, 6, 45 * S),
    allow(75 * S, 4, 0, 10, 105 * S),
    // 8 * weight <= 5 once 5/8 of the previous minute overlaps: at 82.5 s.
    deny(75 * S, 1, 0, 10, 105 * S, 7_500_000),
    deny(82_500_000 - 1, 1, 0, 10, 97_500_001, 1),
    allow(82_500_000, 1, 0, 10, 97_500_000),
    // At 2 min the previous minute (5 units) weighs 1, the one before nothing.
    allow(2 * MIN, 0, 5, 5, MIN),
    // At 3 min every count has slid out.
    allow(3 * MIN, 0, 10, 0, 0),
];

const SW_FOUR_SUB_INTERVALS: &[Req] = &[
    // 4 per second in sub-intervals of 250 ms.
    allow(0, 1, 3, 1, 1_250_000),
    allow(250 * MS, 1, 2, 2, 1_250_000),
    allow(500 * MS, 1, 1, 3, 1_250_000),
    allow(750 * MS, 1, 0, 4, 1_250_000),
    // At 1 s the first quarter becomes the trailing one at weight 1; its weighted count reaches
    // 0 only when it has slid out, at 1.25 s.
    deny(900 * MS, 1, 0, 4, 1_100_000, 350_000),
    deny(900 * MS, 2, 0, 4, 1_100_000, 600_000),
    deny(1_250_000 - 1, 1, 0, 4, 750_001, 1),
    allow(1_250_000, 1, 0, 4, 1_250_000),
];

const SW_NEVER_AND_PEEK: &[Req] = &[
    // 4 per second, two sub-intervals of 500 ms.
    allow(0, 0, 4, 0, 0),
    never(0, 5, 4, 0, 0),
    allow(0, 3, 1, 3, 1_500_000),
    allow(100 * MS, 0, 1, 3, 1_400_000),
    never(100 * MS, 5, 1, 3, 1_400_000),
    // Fits when 3 * weight <= 2: weight 333_333 / 500_000, at 1_166_667 µs (rounded up).
    deny(100 * MS, 2, 1, 3, 1_400_000, 1_066_667),
    deny(1_166_667 - 1, 2, 1, 3, 333_334, 1),
    allow(1_166_667, 2, 0, 4, 1_333_333),
];

const SW_100MS: &[Req] = &[
    // 5 per 100 ms in ten sub-intervals of 10 ms.
    allow(0, 5, 0, 5, 110 * MS),
    deny(55 * MS, 1, 0, 5, 55 * MS, 47 * MS),
    deny(102 * MS - 1, 1, 0, 5, 8_001, 1),
    allow(102 * MS, 1, 0, 5, 108 * MS),
];

const SW_BILLION_A_DAY: &[Req] = &[
    // limit * sub-interval (µs) passes 2^52: the overlap is measured in steps of 19,185 µs and the
    // weighted count rounded up (2_251_760 of 4_503_519 steps still overlap at 1.5 days).
    allow(0, BILLION, 0, 1_000_000_000, 2 * DAY),
    allow(DAY + DAY / 2, 0, 499_999_888, 500_000_112, DAY / 2),
    deny(
        DAY + DAY / 2,
        BILLION,
        499_999_888,
        500_000_112,
        DAY / 2,
        DAY / 2,
    ),
    // One unit more than remains: fits one step (19,185 µs) later, at 43_200_015_600 µs.
    deny(
        DAY + DAY / 2,
        499_999_889,
        499_999_888,
        500_000_112,
        DAY / 2,
        15_600,
    ),
    allow(DAY + DAY / 2, 499_999_888, 0, 1_000_000_000, DAY + DAY / 2),
];

const SW_CLOCK_BACK: &[Req] = &[
    // 2 per second, two sub-intervals of 500 ms.
    allow(S, 1, 1, 1, 1_500_000),
    // Behind the newest counted sub-interval: evaluated at its start (1 s).
    allow(0, 1, 0, 2, 2_500_000),
    deny(0, 1, 0, 2, 2_500_000, 2_250_000),
    deny(S, 1, 0, 2, 1_500_000, 1_250_000),
];

const SW_CLOCK_FAR_BACK: &[Req] = &[
    // 2 per second, two sub-intervals of 500 ms: counted in the one starting at 10 s.
    allow(10 * S, 2, 0, 2, 1_500_000),
    // Two sub-intervals (a period) behind it: evaluated at its start.
    allow(9 * S, 0, 0, 2, 2_500_000),
    // Three behind: the counts cannot be this rule's; they count as nothing and are replaced.
    allow(9 * S - 1, 1, 1, 1, 1_000_001),
    allow(10 * S, 0, 2, 0, 0),
];

// ---- Token bucket and GCRA: the same meter, so the same table --------------------------------

const BUCKET_FOUR_AT_TWO_PER_SECOND: &[Req] = &[
    // Burst 4, 2 per second: a token every 500 ms.
    allow(0, 1, 3, 1, 500_000),
    allow(0, 3, 0, 4, 2 * S),
    deny(0, 1, 0, 4, 2 * S, 500_000),
    deny(500_000 - 1, 1, 0, 4, 1_500_001, 1),
    allow(500_000, 1, 0, 4, 2 * S),
    never(500_000, 5, 0, 4, 2 * S),
    allow(1_500_000, 0, 2, 2, S),
    allow(10 * S, 0, 4, 0, 0),
];

const BUCKET_THIRDS: &[Req] = &[
    // 3 per 10 s: one every 3.33 s, a fraction no µs count holds; retries round up.
    allow(0, 0, 3, 0, 0),
    never(0, 4, 3, 0, 0),
    allow(0, 3, 0, 3, 10 * S),
    allow(S, 0, 0, 3, 9 * S),
    deny(S, 1, 0, 3, 9 * S, 2_333_334),
    deny(3_333_333, 1, 0, 3, 6_666_667, 1),
    allow(3_333_334, 1, 0, 3, 10 * S),
];

const BUCKET_100MS: &[Req] = &[
    // 10 per 100 ms, burst 2.
    allow(0, 2, 0, 2, 20 * MS),
    deny(5 * MS, 1, 0, 2, 15 * MS, 5 * MS),
    allow(10 * MS, 1, 0, 2, 20 * MS),
    allow(50 * MS, 0, 2, 0, 0),
];

const BUCKET_BILLION_A_DAY: &[Req] = &[
    // 10^9 per day, reduced to 5 per 432 µs: a request is 86.4 µs of refill.
    allow(0, BILLION, 0, 1_000_000_000, DAY),
    deny(0, 1, 0, 1_000_000_000, DAY, 87),
    deny(86, 1, 0, 1_000_000_000, DAY - 86, 1),
    allow(87, 1, 0, 1_000_000_000, DAY),
    allow(DAY / 2 + 87, 0, 500_000_000, 500_000_000, DAY / 2),
];

const BUCKET_ONE_PER_TEN_YEARS: &[Req] = &[
    allow(0, 1, 0, 1, TEN_YEARS),
    deny(DAY, 1, 0, 1, TEN_YEARS - DAY, TEN_YEARS - DAY),
    never(DAY, 2, 0, 1, TEN_YEARS - DAY),
];

const BUCKET_CLOCK_BACK: &[Req] = &[
    // Burst 4, 2 per second. Time going back neither drains nor refills: the bucket stays at its
    // time (5 s), a request behind it adds to it there, and waits count from now.
    allow(5 * S, 2, 2, 2, S),
    allow(4 * S, 1, 1, 3, 2_500_000),
    // Back at 5 s all three are still in the bucket (moving its time back to 4 s would drain
    // the second in between twice).
    allow(5 * S, 0, 1, 3, 1_500_000),
    deny(4 * S, 2, 1, 3, 2_500_000, 1_500_000),
];

const BUCKET_ALTERNATING_TIMES: &[Req] = &[
    // Burst 4, 2 per second, callers' times alternating between 10 s and 9 s: the burst passes,
    // then nothing until the bucket drains from 10 s on.
    allow(10 * S, 1, 3, 1, 500_000),
    allow(9 * S, 1, 2, 2, 2 * S),
    allow(10 * S, 1, 1, 3, 1_500_000),
    allow(9 * S, 1, 0, 4, 3 * S),
    deny(10 * S, 1, 0, 4, 2 * S, 500_000),
    deny(9 * S, 1, 0, 4, 3 * S, 1_500_000),
    deny(10 * S, 1, 0, 4, 2 * S, 500_000),
    deny(9 * S, 1, 0, 4, 3 * S, 1_500_000),
    allow(10_500_000, 1, 0, 4, 2 * S),
];

const BUCKET_CLOCK_FAR_BACK: &[Req] = &[
    // Burst 4, 2 per second: a full bucket drains in 2 s.
    allow(10 * S, 2, 2, 2, S),
    // 2 s behind the bucket's time: honoured, the waits count from now.
    allow(8 * S, 0, 2, 2, 3 * S),
    // A µs further back no bucket of this rule could still hold anything at 10 s: the state is
    // foreign and the bucket empty, from now.
    allow(8 * S - 1, 1, 3, 1, 500_000),
    allow(10 * S, 0, 4, 0, 0),
];

// ---- Several rules at once ----------------------------------------------------------------

const MULTI_RULES: &[RuleSpec] = &[
    bucket_named("second", Algo::Gcra, 2, S, 2),
    rule("minute", Algo::SlidingLog, 3, MIN),
    rule("hour", Algo::SlidingWindow(4), 4, 60 * MIN),
];

const fn bucket_named(
    name: &'static str,
    algo: Algo,
    limit: u32,
    period_us: u64,
    burst: u32,
) -> RuleSpec {
    RuleSpec {
        name,
        algo,
        limit,
        period_us,
        burst: Some(burst),
    }
}

const MULTI_ALL_OR_NOTHING: &[Req] = &[
    // The reported rule is the most restrictive: a denial, else the fewest remaining.
    allow(0, 1, 1, 1, 500_000).reported(0),
    allow(0, 1, 0, 2, S).reported(0),
    deny(0, 1, 0, 2, S, 500_000).reported(0),
    allow(S, 1, 0, 3, MIN).reported(1),
    deny(2 * S, 1, 0, 3, 59 * S, 58 * S).reported(1),
    // The denied requests consumed nothing anywhere.
    allow(2 * S, 0, 0, 3, 59 * S).reported(1),
    // The two entries at 0 left the log; the hour (4 sub-intervals of 15 min) is now full.
    allow(MIN, 1, 0, 4, 74 * MIN).reported(2),
    // It fits again once the first quarter-hour has slid a quarter out: at 63.75 min.
    deny(MIN + S, 1, 0, 4, 74 * MIN - S, 3_764 * S).reported(2),
];

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "fw-resets-at-window-end",
        rules: &[FW],
        requests: FW_RESETS_AT_WINDOW_END,
    },
    Scenario {
        name: "fw-never-and-peek",
        rules: &[FW],
        requests: FW_NEVER_AND_PEEK,
    },
    Scenario {
        name: "fw-100ms",
        rules: &[rule("fw", Algo::FixedWindow, 3, 100 * MS)],
        requests: FW_100MS,
    },
    Scenario {
        name: "fw-billion-a-day",
        rules: &[rule("fw", Algo::FixedWindow, BILLION, DAY)],
        requests: FW_BILLION_A_DAY,
    },
    Scenario {
        name: "fw-clock-back",
        rules: &[FW],
        requests: FW_CLOCK_BACK,
    },
    Scenario {
        name: "fw-clock-far-back",
        rules: &[FW],
        requests: FW_CLOCK_FAR_BACK,
    },
    Scenario {
        name: "log-slides-entry-by-entry",
        rules: &[LOG],
        requests: LOG_SLIDES_ENTRY_BY_ENTRY,
    },
    Scenario {
        name: "log-same-microsecond",
        rules: &[LOG],
        requests: LOG_SAME_MICROSECOND,
    },
    Scenario {
        name: "log-never-and-peek",
        rules: &[LOG],
        requests: LOG_NEVER_AND_PEEK,
    },
    Scenario {
        name: "log-100ms",
        rules: &[rule("log", Algo::SlidingLog, 2, 100 * MS)],
        requests: LOG_100MS,
    },
    Scenario {
        name: "log-ten-thousand-a-day",
        rules: &[rule("log", Algo::SlidingLog, 10_000, DAY)],
        requests: LOG_TEN_THOUSAND_A_DAY,
    },
    Scenario {
        name: "log-clock-back",
        rules: &[LOG],
        requests: LOG_CLOCK_BACK,
    },
    Scenario {
        name: "log-clock-far-back",
        rules: &[LOG],
        requests: LOG_CLOCK_FAR_BACK,
    },
    Scenario {
        name: "sw-one-sub-interval",
        rules: &[rule("sw", Algo::SlidingWindow(1), 10, MIN)],
        requests: SW_ONE_SUB_INTERVAL,
    },
    Scenario {
        name: "sw-four-sub-intervals",
        rules: &[rule("sw", Algo::SlidingWindow(4), 4, S)],
        requests: SW_FOUR_SUB_INTERVALS,
    },
    Scenario {
        name: "sw-never-and-peek",
        rules: &[rule("sw", Algo::SlidingWindow(2), 4, S)],
        requests: SW_NEVER_AND_PEEK,
    },
    Scenario {
        name: "sw-100ms",
        rules: &[rule("sw", Algo::SlidingWindow(10), 5, 100 * MS)],
        requests: SW_100MS,
    },
    Scenario {
        name: "sw-billion-a-day",
        rules: &[rule("sw", Algo::SlidingWindow(1), BILLION, DAY)],
        requests: SW_BILLION_A_DAY,
    },
    Scenario {
        name: "sw-clock-back",
        rules: &[rule("sw", Algo::SlidingWindow(2), 2, S)],
        requests: SW_CLOCK_BACK,
    },
    Scenario {
        name: "sw-clock-far-back",
        rules: &[rule("sw", Algo::SlidingWindow(2), 2, S)],
        requests: SW_CLOCK_FAR_BACK,
    },
    Scenario {
        name: "tb-four-at-two-per-second",
        rules: &[bucket(Algo::TokenBucket, 2, S, 4)],
        requests: BUCKET_FOUR_AT_TWO_PER_SECOND,
    },
    Scenario {
        name: "gcra-four-at-two-per-second",
        rules: &[bucket(Algo::Gcra, 2, S, 4)],
        requests: BUCKET_FOUR_AT_TWO_PER_SECOND,
    },
    Scenario {
        name: "tb-thirds",
        rules: &[bucket(Algo::TokenBucket, 3, 10 * S, 3)],
        requests: BUCKET_THIRDS,
    },
    Scenario {
        name: "gcra-thirds",
        rules: &[bucket(Algo::Gcra, 3, 10 * S, 3)],
        requests: BUCKET_THIRDS,
    },
    Scenario {
        name: "tb-100ms",
        rules: &[bucket(Algo::TokenBucket, 10, 100 * MS, 2)],
        requests: BUCKET_100MS,
    },
    Scenario {
        name: "gcra-100ms",
        rules: &[bucket(Algo::Gcra, 10, 100 * MS, 2)],
        requests: BUCKET_100MS,
    },
    Scenario {
        name: "tb-billion-a-day",
        rules: &[bucket(Algo::TokenBucket, BILLION, DAY, BILLION)],
        requests: BUCKET_BILLION_A_DAY,
    },
    Scenario {
        name: "gcra-billion-a-day",
        rules: &[bucket(Algo::Gcra, BILLION, DAY, BILLION)],
        requests: BUCKET_BILLION_A_DAY,
    },
    Scenario {
        name: "tb-one-per-ten-years",
        rules: &[bucket(Algo::TokenBucket, 1, TEN_YEARS, 1)],
        requests: BUCKET_ONE_PER_TEN_YEARS,
    },
    Scenario {
        name: "gcra-one-per-ten-years",
        rules: &[bucket(Algo::Gcra, 1, TEN_YEARS, 1)],
        requests: BUCKET_ONE_PER_TEN_YEARS,
    },
    Scenario {
        name: "tb-clock-back",
        rules: &[bucket(Algo::TokenBucket, 2, S, 4)],
        requests: BUCKET_CLOCK_BACK,
    },
    Scenario {
        name: "gcra-clock-back",
        rules: &[bucket(Algo::Gcra, 2, S, 4)],
        requests: BUCKET_CLOCK_BACK,
    },
    Scenario {
        name: "tb-clock-far-back",
        rules: &[bucket(Algo::TokenBucket, 2, S, 4)],
        requests: BUCKET_CLOCK_FAR_BACK,
    },
    Scenario {
        name: "gcra-clock-far-back",
        rules: &[bucket(Algo::Gcra, 2, S, 4)],
        requests: BUCKET_CLOCK_FAR_BACK,
    },
    Scenario {
        name: "tb-alternating-times",
        rules: &[bucket(Algo::TokenBucket, 2, S, 4)],
        requests: BUCKET_ALTERNATING_TIMES,
    },
    Scenario {
        name: "gcra-alternating-times",
        rules: &[bucket(Algo::Gcra, 2, S, 4)],
        requests: BUCKET_ALTERNATING_TIMES,
    },
    Scenario {
        name: "multi-all-or-nothing",
        rules: MULTI_RULES,
        requests: MULTI_ALL_OR_NOTHING,
    },
];

// ---- A rule's quota changing under the same name ------------------------------------------
//
// Each phase runs under its own policy, on the same stores, clock and client key, so it sees what
// the earlier phases left. A change of what the state is counted in (a period, a bucket's rate,
// sub-intervals) names another key: the new quota starts fresh and the old state waits, untouched,
// for its TTL. A new limit (windows) or burst (buckets) keeps the key and reads the state as it is.

/// One quota of a rule, and the requests made under it.
struct Phase {
    rules: &'static [RuleSpec],
    requests: &'static [Req],
}

struct QuotaChange {
    name: &'static str,
    phases: &'static [Phase],
}

const fn phase(rules: &'static [RuleSpec], requests: &'static [Req]) -> Phase {
    Phase { rules, requests }
}

const FW_CHANGES: &[Phase] = &[
    phase(
        &[rule("fw", Algo::FixedWindow, 5, 10 * S)],
        &[allow(0, 3, 2, 3, 10 * S)],
    ),
    // A lowered limit: the 3 units used are more than it holds, so nothing fits until the window
    // ends (not even a peek, which reports the overdraft as a denial).
    phase(
        &[rule("fw", Algo::FixedWindow, 2, 10 * S)],
        &[
            deny(S, 0, 0, 3, 9 * S, 9 * S),
            deny(S, 1, 0, 3, 9 * S, 9 * S),
        ],
    ),
    // A raised one: the same window, with more room.
    phase(
        &[rule("fw", Algo::FixedWindow, 10, 10 * S)],
        &[allow(2 * S, 1, 6, 4, 8 * S)],
    ),
    // Another period: a window of its own.
    phase(
        &[rule("fw", Algo::FixedWindow, 10, MIN)],
        &[allow(3 * S, 1, 9, 1, MIN)],
    ),
    // And back: the 10 s window is still the one that started at 0.
    phase(
        &[rule("fw", Algo::FixedWindow, 10, 10 * S)],
        &[allow(4 * S, 0, 6, 4, 6 * S)],
    ),
];

const LOG_CHANGES: &[Phase] = &[
    phase(
        &[LOG],
        &[allow(0, 2, 1, 2, 10 * S), allow(S, 1, 0, 3, 10 * S)],
    ),
    // A lowered limit: 3 entries for a limit of 1. A peek fits once two have left (at 10 s), a
    // request once all three have (at 11 s).
    phase(
        &[rule("log", Algo::SlidingLog, 1, 10 * S)],
        &[
            deny(2 * S, 0, 0, 3, 9 * S, 8 * S),
            deny(2 * S, 1, 0, 3, 9 * S, 9 * S),
            deny(10 * S, 1, 0, 1, S, S),
            allow(11 * S, 1, 0, 1, 10 * S),
        ],
    ),
    // A raised limit counts the same entries.
    phase(
        &[rule("log", Algo::SlidingLog, 5, 10 * S)],
        &[allow(12 * S, 2, 2, 3, 10 * S)],
    ),
    // Another period: a log of its own.
    phase(
        &[rule("log", Algo::SlidingLog, 5, MIN)],
        &[allow(13 * S, 0, 5, 0, 0)],
    ),
];

const SW_CHANGES: &[Phase] = &[
    // 3 per minute in sub-intervals of 1 s.
    phase(
        &[rule("sw", Algo::SlidingWindow(60), 3, MIN)],
        &[allow(0, 3, 0, 3, 61 * S)],
    ),
    // A lowered limit: the 3 counted at 0 exceed it. A peek fits when 3 × the trailing weight is
    // at most 2, 1/3 into the second after the minute; a request when it is at most 1, at 2/3.
    phase(
        &[rule("sw", Algo::SlidingWindow(60), 2, MIN)],
        &[
            deny(2 * S, 0, 0, 3, 59 * S, 58_333_334),
            deny(2 * S, 1, 0, 3, 59 * S, 58_666_667),
        ],
    ),
    // A raised limit: the same counts, more room.
    phase(
        &[rule("sw", Algo::SlidingWindow(60), 10, MIN)],
        &[allow(2 * S, 1, 6, 4, 61 * S)],
    ),
    // 5 per hour, still 60 sub-intervals, now of a minute. Read as minutes, the seconds counted
    // above would lie ~28 million years ahead; this quota has counts of its own instead, and the
    // 61 minutes to reset that it needs.
    phase(
        &[rule("sw", Algo::SlidingWindow(60), 5, 60 * MIN)],
        &[allow(3 * S, 2, 3, 2, 61 * MIN - 3 * S)],
    ),
    // Other sub-intervals of the same period: counts of their own.
    phase(
        &[rule("sw", Algo::SlidingWindow(30), 10, MIN)],
        &[allow(3 * S, 0, 10, 0, 0)],
    ),
];

// The buckets first change rate and period (a level is counted in units of the rate, so each
// rate has a bucket of its own), then burst: GCRA keeps its level (a raised burst is room at
// once), while a token bucket's tokens refill for longer under a larger burst, so each burst has
// a bucket of its own.

/// 3 per second, burst 3: all taken.
const BUCKET_RATE_A: &[Req] = &[allow(0, 3, 0, 3, S)];
/// 10 per second: read in this rate's units, the 3 taken would be 30 of 10; it has a bucket of
/// its own, full.
const BUCKET_RATE_B: &[Req] = &[allow(0, 0, 10, 0, 0), allow(0, 10, 0, 10, S)];
/// Back to 3 per second: its bucket, drained 100 ms since, holds 2.7 requests.
const BUCKET_RATE_A_AGAIN: &[Req] = &[deny(100 * MS, 1, 0, 3, 900 * MS, 233_334)];
/// The same rate as 180 per minute: another period, another bucket.
const BUCKET_PERIOD: &[Req] = &[allow(100 * MS, 0, 3, 0, 0)];

const TB_CHANGES: &[Phase] = &[
    phase(&[bucket(Algo::TokenBucket, 3, S, 3)], BUCKET_RATE_A),
    phase(&[bucket(Algo::TokenBucket, 10, S, 10)], BUCKET_RATE_B),
    phase(&[bucket(Algo::TokenBucket, 3, S, 3)], BUCKET_RATE_A_AGAIN),
    phase(&[bucket(Algo::TokenBucket, 180, MIN, 3)], BUCKET_PERIOD),
    // Burst 6: a bucket of its own, full.
    phase(
        &[bucket(Algo::TokenBucket, 3, S, 6)],
        &[allow(100 * MS, 6, 0, 6, 2 * S)],
    ),
    // Burst 3 again: 0.6 tokens at 200 ms; one more fits at 1/3 s.
    phase(
        &[bucket(Algo::TokenBucket, 3, S, 3)],
        &[deny(200 * MS, 1, 0, 3, 800 * MS, 133_334)],
    ),
];

const GCRA_CHANGES: &[Phase] = &[
    phase(&[bucket(Algo::Gcra, 3, S, 3)], BUCKET_RATE_A),
    phase(&[bucket(Algo::Gcra, 10, S, 10)], BUCKET_RATE_B),
    phase(&[bucket(Algo::Gcra, 3, S, 3)], BUCKET_RATE_A_AGAIN),
    phase(&[bucket(Algo::Gcra, 180, MIN, 3)], BUCKET_PERIOD),
    // Burst 6: the level of 2.7 leaves room for 3.3.
    phase(
        &[bucket(Algo::Gcra, 3, S, 6)],
        &[allow(100 * MS, 3, 0, 6, 1_900 * MS)],
    ),
    // Burst 2: a level of 5.4, so nothing fits until it has drained to 2 (a peek) or 1.
    phase(
        &[bucket(Algo::Gcra, 3, S, 2)],
        &[
            deny(200 * MS, 0, 0, 6, 1_800 * MS, 1_133_334),
            deny(200 * MS, 1, 0, 6, 1_800 * MS, 1_466_667),
        ],
    ),
];

const QUOTA_CHANGES: &[QuotaChange] = &[
    QuotaChange {
        name: "fw-quota-changes",
        phases: FW_CHANGES,
    },
    QuotaChange {
        name: "log-quota-changes",
        phases: LOG_CHANGES,
    },
    QuotaChange {
        name: "sw-quota-changes",
        phases: SW_CHANGES,
    },
    QuotaChange {
        name: "tb-quota-changes",
        phases: TB_CHANGES,
    },
    QuotaChange {
        name: "gcra-quota-changes",
        phases: GCRA_CHANGES,
    },
];

/// A scenario's stores, on one clock, and a plain connection to inspect Redis.
struct Stores {
    clock: ManualClock,
    memory: MemoryStore,
    redis: RedisStore,
    probe: MultiplexedConnection,
    prefix: &'static str,
}

impl Stores {
    async fn new(server: &RedisServer, prefix: &'static str) -> Self {
        let clock = ManualClock::new(T0);
        let probe = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Stores {
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            redis: RedisStore::builder(&server.url())
                .prefix(prefix)
                .clock(clock.clone())
                .build()
                .unwrap(),
            clock,
            probe,
            prefix,
        }
    }

    /// Redis's count of writes since start: any write, even a TTL refresh alone, moves it.
    async fn writes(&mut self) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query_async(&mut self.probe)
            .await
            .unwrap();
        info.lines()
            .find_map(|line| line.trim().strip_prefix("rdb_changes_since_last_save:"))
            .expect("rdb_changes_since_last_save in INFO")
            .parse()
            .unwrap()
    }

    /// The keys under this scenario's prefix, and any of them without a TTL.
    async fn keys(&mut self) -> (BTreeSet<String>, Vec<String>) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
            .query_async(&mut self.probe)
            .await
            .unwrap();
        let mut immortal = Vec::new();
        for key in &keys {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut self.probe)
                .await
                .unwrap();
            if ttl <= 0 {
                immortal.push(format!("{key} (PTTL {ttl})"));
            }
        }
        (keys.into_iter().collect(), immortal)
    }

    /// Runs every request of `scenario`; the first problem ends it.
    async fn run(&mut self, scenario: &Scenario) -> Result<(), String> {
        self.run_phase(scenario.rules, scenario.requests, &mut BTreeSet::new())
            .await
    }

    /// Runs every phase of `change` in turn; the first problem ends it.
    async fn run_change(&mut self, change: &QuotaChange) -> Result<(), String> {
        let mut state_keys = BTreeSet::new();
        for (index, phase) in change.phases.iter().enumerate() {
            self.run_phase(phase.rules, phase.requests, &mut state_keys)
                .await
                .map_err(|problem| format!("phase {index}: {problem}"))?;
        }
        Ok(())
    }

    /// Runs `requests` under a policy of `rules`. `state_keys` gathers the keys of every policy run
    /// so far on this client: a key written under an earlier quota may still be there.
    async fn run_phase(
        &mut self,
        rules: &[RuleSpec],
        requests: &[Req],
        state_keys: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        let policy = Policy::new(rules.iter().map(RuleSpec::rule))
            .map_err(|err| format!("the policy does not build: {err}"))?;
        let key = Key::from("client");
        state_keys.extend(self.redis.state_keys(&key, &policy));
        for (index, req) in requests.iter().enumerate() {
            let at = format!("request {index} (at +{} µs, cost {})", req.at, req.cost);
            self.clock.set(T0 + req.at);
            let memory = self.memory.check(&key, &policy, req.cost).await.unwrap();
            let writes_before = self.writes().await;
            let redis = self
                .redis
                .check(&key, &policy, req.cost)
                .await
                .map_err(|err| format!("{at}: Redis failed: {err}"))?;
            let writes = self.writes().await - writes_before;
            if memory != redis {
                return Err(format!(
                    "{at}: the stores disagree\n  memory: {memory:?}\n  redis:  {redis:?}"
                ));
            }
            if let Some(difference) = unexpected(&redis, req) {
                return Err(format!("{at}: {difference}\n  got: {redis:?}"));
            }
            let writing = req.outcome == Outcome::Allowed && req.cost > 0;
            if !writing && writes != 0 {
                return Err(format!("{at}: wrote {writes} times without admitting"));
            }
            if writing && writes == 0 {
                return Err(format!("{at}: admitted without writing"));
            }
            let (keys, immortal) = self.keys().await;
            if !immortal.is_empty() {
                return Err(format!("{at}: keys without a TTL: {immortal:?}"));
            }
            if !keys.is_subset(state_keys) {
                return Err(format!(
                    "{at}: wrote {keys:?}, but state_keys says {state_keys:?}"
                ));
            }
        }
        Ok(())
    }
}

/// How `decision` differs from what the table expects, if it does.
fn unexpected(decision: &Decision, req: &Req) -> Option<String> {
    let retry_after =
        (req.outcome == Outcome::Denied).then(|| Duration::from_micros(req.retry_after));
    let expected = (
        req.outcome,
        req.rule,
        req.remaining,
        req.used,
        Duration::from_micros(req.reset_after),
        retry_after,
    );
    let got = (
        decision.outcome(),
        decision.rule_index(),
        decision.remaining(),
        decision.used(),
        decision.reset_after(),
        decision.retry_after(),
    );
    (got != expected).then(|| {
        format!(
            "expected (outcome, rule, remaining, used, reset_after, retry_after) = {expected:?}, got {got:?}"
        )
    })
}

#[tokio::test]
async fn every_scenario_decides_identically_on_both_stores_and_as_the_table_says() {
    let server = RedisServer::start();
    let mut failures = Vec::new();
    let mut names = BTreeSet::new();
    for scenario in SCENARIOS {
        assert!(names.insert(scenario.name), "{} twice", scenario.name);
        let mut stores = Stores::new(&server, scenario.name).await;
        if let Err(problem) = stores.run(scenario).await {
            failures.push(format!("{}: {problem}", scenario.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        SCENARIOS.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn quota_changes_under_the_same_name_decide_identically_on_both_stores() {
    let server = RedisServer::start();
    let mut failures = Vec::new();
    for change in QUOTA_CHANGES {
        let mut stores = Stores::new(&server, change.name).await;
        if let Err(problem) = stores.run_change(change).await {
            failures.push(format!("{}: {problem}", change.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} quota changes failed:\n{}",
        failures.len(),
        QUOTA_CHANGES.len(),
        failures.join("\n")
    );
}

/// The table keeps covering every edge case for every algorithm, whatever is added to it.
#[test]
fn the_table_covers_every_algorithm_and_edge_case() {
    type Is = fn(Algo) -> bool;
    let kinds: [(&str, Is); 5] = [
        ("fixed window", |a| matches!(a, Algo::FixedWindow)),
        ("sliding log", |a| matches!(a, Algo::SlidingLog)),
        ("sliding window", |a| matches!(a, Algo::SlidingWindow(_))),
        ("token bucket", |a| matches!(a, Algo::TokenBucket)),
        ("GCRA", |a| matches!(a, Algo::Gcra)),
    ];
    for (kind, is) in kinds {
        let scenarios: Vec<&Scenario> = SCENARIOS
            .iter()
            .filter(|scenario| scenario.rules.len() == 1 && is(scenario.rules[0].algo))
            .collect();
        let requests = || scenarios.iter().flat_map(|scenario| scenario.requests);
        let rules = || scenarios.iter().map(|scenario| scenario.rules[0]);
        // Each change of quota in a quota-change scenario of this algorithm: (before, after).
        let changes = || {
            QUOTA_CHANGES
                .iter()
                .flat_map(|change| change.phases.windows(2))
                .map(|pair| (pair[0].rules[0], pair[1].rules[0]))
                .filter(|(before, after)| is(before.algo) && is(after.algo))
        };
        let cases = [
            ("a peek", requests().any(|req| req.cost == 0)),
            ("a cost above 1", requests().any(|req| req.cost > 1)),
            (
                "a denial",
                requests().any(|req| req.outcome == Outcome::Denied),
            ),
            (
                "a request that can never pass",
                requests().any(|req| req.outcome == Outcome::Never),
            ),
            (
                "a period of 100 ms",
                rules().any(|rule| rule.period_us == 100 * MS),
            ),
            (
                "a period of a day or more",
                rules().any(|rule| rule.period_us >= DAY),
            ),
            (
                "a limit of 10,000 or more",
                rules().any(|rule| rule.limit >= 10_000),
            ),
            (
                "a clock going back",
                scenarios.iter().any(|scenario| {
                    scenario
                        .requests
                        .windows(2)
                        .any(|pair| pair[1].at < pair[0].at)
                }),
            ),
            (
                "a clock going back further than the rule's state can matter",
                scenarios.iter().any(|scenario| {
                    let span = scenario.rules[0].span();
                    let mut latest = 0;
                    scenario.requests.iter().any(|req| {
                        latest = latest.max(req.at);
                        latest - req.at > span
                    })
                }),
            ),
            (
                "a quota change to another period",
                changes().any(|(before, after)| before.period_us != after.period_us),
            ),
            (
                "a quota change to a lower limit or burst",
                changes().any(|(before, after)| {
                    before.period_us == after.period_us && after.capacity() < before.capacity()
                }),
            ),
            (
                "a quota change to a higher limit or burst",
                changes().any(|(before, after)| {
                    before.period_us == after.period_us && after.capacity() > before.capacity()
                }),
            ),
        ];
        for (case, covered) in cases {
            assert!(covered, "no {kind} scenario has {case}");
        }
    }
}
