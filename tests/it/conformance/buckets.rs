//! The token bucket and GCRA: the same meter, so the same tables, run for each.

use super::{
    Algo, BILLION, DAY, MIN, MS, Phase, QuotaChange, Req, S, Scenario, TEN_YEARS, allow, bucket,
    deny, never, phase,
};

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

const BUCKET_SMOOTHED: &[Req] = &[
    // Burst 2, 2 per second (500 ms a request), up to 1 s of delay: the burst passes, the next
    // two wait 500 ms and 1 s (their places in the schedule taken now), the fifth is refused
    // until it would wait no more than 1 s.
    allow(0, 1, 1, 1, 500 * MS),
    allow(0, 1, 0, 2, S),
    allow(0, 1, 0, 3, 1_500 * MS).waiting(500 * MS),
    allow(0, 1, 0, 4, 2 * S).waiting(S),
    deny(0, 1, 0, 4, 2 * S, 500 * MS),
    // A peek takes no place: admitted, it waits for nothing.
    allow(0, 0, 0, 4, 2 * S),
    deny(250 * MS, 1, 0, 4, 1_750 * MS, 250 * MS),
    // Exactly its retry-after later, admitted to wait the whole max_delay.
    allow(500 * MS, 1, 0, 4, 2 * S).waiting(S),
    // Drained: a cost above the burst fits within the delay, waits for its excess; one past
    // burst and delay together can never pass.
    allow(10 * S, 3, 0, 3, 1_500 * MS).waiting(500 * MS),
    never(10 * S, 5, 0, 3, 1_500 * MS),
    allow(20 * S, 0, 2, 0, 0),
];

const BUCKET_SMOOTHED_THIRDS: &[Req] = &[
    // 3 per 10 s (one every 3.33 s), burst 1, up to 5 s of delay: waits round up like retries.
    allow(0, 1, 0, 1, 3_333_334),
    allow(0, 1, 0, 2, 6_666_667).waiting(3_333_334),
    deny(0, 1, 0, 2, 6_666_667, 1_666_667),
    allow(1_666_667, 1, 0, 3, 8_333_333).waiting(5 * S),
    // Time going back: the bucket stays at its time, and waits count from now.
    deny(1_166_667, 1, 0, 3, 8_833_333, 3_833_333),
    allow(10 * S, 1, 0, 1, 3_333_334),
    allow(9_500 * MS, 1, 0, 2, 7_166_667).waiting(3_833_334),
];

pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "tb-smoothed",
        rules: &[bucket(Algo::TokenBucket, 2, S, 2).delaying(S)],
        requests: BUCKET_SMOOTHED,
    },
    Scenario {
        name: "gcra-smoothed",
        rules: &[bucket(Algo::Gcra, 2, S, 2).delaying(S)],
        requests: BUCKET_SMOOTHED,
    },
    Scenario {
        name: "tb-smoothed-thirds",
        rules: &[bucket(Algo::TokenBucket, 3, 10 * S, 1).delaying(5 * S)],
        requests: BUCKET_SMOOTHED_THIRDS,
    },
    Scenario {
        name: "gcra-smoothed-thirds",
        rules: &[bucket(Algo::Gcra, 3, 10 * S, 1).delaying(5 * S)],
        requests: BUCKET_SMOOTHED_THIRDS,
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
];

// ---- Its quota changing under the same name -----------------------------------------------

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

pub(super) const QUOTA_CHANGES: &[QuotaChange] = &[
    QuotaChange {
        name: "tb-quota-changes",
        phases: TB_CHANGES,
    },
    QuotaChange {
        name: "gcra-quota-changes",
        phases: GCRA_CHANGES,
    },
];
