//! Policies of several rules at once: all or nothing, and the most restrictive rule reported.

use super::{Algo, MIN, MS, Req, RuleSpec, S, Scenario, allow, deny, rule};

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
        max_delay_us: 0,
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

const MULTI_DELAYED: &[Req] = &[
    // A GCRA rule of 2 per second, burst 1, waiting up to 1 s, with 2 per second in fixed
    // windows: the second request waits 500 ms; the third, which the GCRA rule would queue for
    // 1 s, is refused by the window and takes no place in the schedule.
    allow(0, 1, 0, 1, 500 * MS).reported(0),
    allow(0, 1, 0, 2, S).reported(0).waiting(500 * MS),
    deny(0, 1, 0, 2, S, S).reported(1),
    // In the next window the GCRA rule has drained the two it admitted, and only those.
    allow(1_100 * MS, 1, 0, 1, 500 * MS).reported(0),
];

pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "multi-all-or-nothing",
        rules: MULTI_RULES,
        requests: MULTI_ALL_OR_NOTHING,
    },
    Scenario {
        name: "multi-delayed",
        rules: &[
            bucket_named("rate", Algo::Gcra, 2, S, 1).delaying(S),
            rule("window", Algo::FixedWindow, 2, S),
        ],
        requests: MULTI_DELAYED,
    },
];
