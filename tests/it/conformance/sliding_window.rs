//! The sliding window counter: counts per sub-interval, the trailing one weighted by its overlap.

use super::{
    Algo, BILLION, DAY, MIN, MS, Phase, QuotaChange, Req, S, Scenario, allow, deny, never, phase,
    rule,
};

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

pub(super) const SCENARIOS: &[Scenario] = &[
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
];

// ---- Its quota changing under the same name -----------------------------------------------

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

pub(super) const QUOTA_CHANGES: &[QuotaChange] = &[QuotaChange {
    name: "sw-quota-changes",
    phases: SW_CHANGES,
}];
