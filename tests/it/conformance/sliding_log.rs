//! The sliding log: every admitted unit is an entry that counts for one period.

use super::{
    Algo, DAY, MIN, MS, Phase, QuotaChange, Req, RuleSpec, S, Scenario, allow, deny, never, phase,
    rule,
};

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

pub(super) const SCENARIOS: &[Scenario] = &[
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
];

// ---- Its quota changing under the same name -----------------------------------------------

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

pub(super) const QUOTA_CHANGES: &[QuotaChange] = &[QuotaChange {
    name: "log-quota-changes",
    phases: LOG_CHANGES,
}];
