//! The stores agree step by step on a few thousand random requests (times, keys, costs and
//! policies), where no scenario spells out the decisions.

use std::time::Duration;

use tower_redis_ratelimit::{Policy, Quota, Rule};

use super::{Stores, fixed_window, gcra};
use tower_redis_ratelimit::decision::Outcome;

/// A few thousand random steps (times, keys, costs, policies) against both stores.
#[tokio::test]
async fn random_scenarios_agree_step_by_step() {
    let stores = Stores::redis();
    let policies = [
        fixed_window(),
        gcra(),
        Policy::try_from(Rule::gcra("minute", Quota::per_minute(100).with_burst(10))).unwrap(),
        Policy::try_from(Rule::fixed_window(
            "odd",
            Quota::new(7, Duration::from_micros(3_700_001)),
        ))
        .unwrap(),
        Policy::try_from(Rule::gcra(
            "odd-gcra",
            Quota::new(7, Duration::from_micros(3_700_001)).with_burst(2),
        ))
        .unwrap(),
        Policy::new([
            Rule::fixed_window("fw-a", Quota::new(4, Duration::from_secs(2))),
            Rule::gcra("gcra-b", Quota::per_second(3).with_burst(5)),
            Rule::fixed_window("fw-c", Quota::per_minute(20)),
        ])
        .unwrap(),
    ];
    // xorshift64*: deterministic, so a failure reproduces.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |bound: u64| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound
    };
    let mut last_wait: Option<u64> = None;
    let (mut allowed, mut denied, mut never) = (0, 0, 0);
    let (mut policy, mut key) = (&policies[0], "a");
    for _ in 0..3_000 {
        match next(20) {
            0..=7 => {}
            8 => stores.advance_us(1),
            9 => stores.advance_us(next(5_000_000)),
            // Exactly as long as the last denial said, or a microsecond less.
            10 => {
                if let Some(wait) = last_wait {
                    stores.advance_us(wait - next(2).min(wait));
                }
            }
            _ => stores.advance_us(next(20_000)),
        }
        // Mostly stay with one client and policy for a while, so limits are reached.
        if next(4) == 0 {
            policy = &policies[next(policies.len() as u64) as usize];
            key = ["a", "b", "c"][next(3) as usize];
        }
        let cost = [0, 1, 1, 1, 2, 3, 6][next(7) as usize];
        let decision = stores.check(key, policy, cost).await;
        match decision.outcome() {
            Outcome::Allowed => allowed += 1,
            Outcome::Denied => {
                denied += 1;
                last_wait = decision
                    .retry_after()
                    .map(|wait| u64::try_from(wait.as_micros()).unwrap());
            }
            Outcome::Never => never += 1,
        }
    }
    // The walk visited every outcome, many times.
    assert!(
        allowed > 300 && denied > 300 && never > 30,
        "{allowed} {denied} {never}"
    );
}
