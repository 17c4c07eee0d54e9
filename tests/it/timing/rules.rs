//! Several rules at once: all or nothing. A request one rule refuses is charged to none, and the
//! decision reports the refusing rule and its wait.

use std::time::Duration;

use tower_redis_ratelimit::{Decision, Policy, Quota, Rule};

use super::{Stores, micros};
use tower_redis_ratelimit::decision::{Outcome, RuleVerdict};

on_both_stores!(
    a_request_denied_by_one_rule_consumes_none,
    a_window_and_a_bucket_are_all_or_nothing,
);

async fn a_request_denied_by_one_rule_consumes_none(stores: Stores) {
    let policy = Policy::new([
        Rule::fixed_window("short", Quota::new(2, Duration::from_secs(1))),
        Rule::fixed_window("long", Quota::per_hour(3)),
    ])
    .unwrap();
    let allowed = |short: (u64, u64, u64), long: (u64, u64, u64)| {
        Decision::from_verdicts(
            &policy,
            &[
                RuleVerdict::new(
                    Outcome::Allowed,
                    short.0,
                    short.1,
                    micros(short.2),
                    Duration::ZERO,
                ),
                RuleVerdict::new(
                    Outcome::Allowed,
                    long.0,
                    long.1,
                    micros(long.2),
                    Duration::ZERO,
                ),
            ],
        )
    };
    assert_eq!(
        stores.check("k", &policy, 1).await,
        allowed((1, 1, 1_000_000), (2, 1, 3_600_000_000))
    );
    assert_eq!(
        stores.check("k", &policy, 1).await,
        allowed((0, 2, 1_000_000), (1, 2, 3_600_000_000))
    );
    // "short" refuses; "long" is not charged for it.
    let denied = stores.check("k", &policy, 1).await;
    assert_eq!(denied.outcome(), Outcome::Denied);
    assert_eq!(denied.rule_index(), 0);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    stores.clock.advance(Duration::from_secs(1));
    assert_eq!(
        stores.check("k", &policy, 1).await,
        allowed((1, 1, 1_000_000), (0, 3, 3_599_000_000))
    );
    // Now "long" refuses and "short" is not charged: after it, short still has 1 left.
    let denied = stores.check("k", &policy, 1).await;
    assert_eq!(denied.rule_index(), 1);
    assert_eq!(denied.retry_after(), Some(micros(3_599_000_000)));
    assert_eq!(
        stores.check("k", &policy, 0).await,
        allowed((1, 1, 1_000_000), (0, 3, 3_599_000_000))
    );
}

async fn a_window_and_a_bucket_are_all_or_nothing(stores: Stores) {
    let policy = Policy::new([
        Rule::fixed_window("short", Quota::new(2, Duration::from_secs(1))),
        Rule::gcra("long", Quota::per_hour(3)),
    ])
    .unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(stores.check("k", &policy, 1).await);
    }
    stores.advance_us(1_000_000);
    outcomes.push(stores.check("k", &policy, 1).await);
    outcomes.push(stores.check("k", &policy, 1).await);
    let summary: Vec<_> = outcomes
        .iter()
        .map(|d| (d.outcome(), d.rule_index(), d.remaining()))
        .collect();
    assert_eq!(
        summary,
        [
            (Outcome::Allowed, 0, 1),
            (Outcome::Allowed, 0, 0),
            // "short" refuses; "long" is not charged.
            (Outcome::Denied, 0, 0),
            (Outcome::Allowed, 1, 0),
            // "long" refuses (20 min per request); "short" is not charged.
            (Outcome::Denied, 1, 0),
        ]
    );
    assert_eq!(
        outcomes[4].retry_after(),
        Some(Duration::from_micros(1_200_000_000 - 1_000_000))
    );
}
