//! The tables keep covering every algorithm and edge case, whatever is added to them.

use super::{Algo, DAY, MS, Scenario, quota_changes, scenarios};
use tower_redis_ratelimit::decision::Outcome;

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
        let scenarios: Vec<&Scenario> = scenarios()
            .filter(|scenario| scenario.rules.len() == 1 && is(scenario.rules[0].algo))
            .collect();
        let requests = || scenarios.iter().flat_map(|scenario| scenario.requests);
        let rules = || scenarios.iter().map(|scenario| scenario.rules[0]);
        // Each change of quota in a quota-change scenario of this algorithm: (before, after).
        let changes = || {
            quota_changes()
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
