//! The fixed window: a window of the period from the key's first request after the previous one.

use super::{
    Algo, BILLION, DAY, MIN, MS, Phase, QuotaChange, Req, RuleSpec, S, Scenario, allow, deny,
    never, phase, rule,
};

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

pub(super) const SCENARIOS: &[Scenario] = &[
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
];

// ---- Its quota changing under the same name -----------------------------------------------

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

pub(super) const QUOTA_CHANGES: &[QuotaChange] = &[QuotaChange {
    name: "fw-quota-changes",
    phases: FW_CHANGES,
}];
