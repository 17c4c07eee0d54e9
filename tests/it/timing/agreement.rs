//! The memory store and the Redis store decide identically. Each scenario drives one
//! `ManualClock` shared by a `MemoryStore` and a `RedisStore` (whose script then uses the caller's
//! time instead of the server's), sends every request to both, and requires equal `Decision`s at
//! every step, besides the exact values expected.

use std::time::Duration;

use tower_redis_ratelimit::clock::{Clock, ManualClock};
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{
    Decision, MemoryStore, Outcome, Policy, Quota, RedisStore, Rule, RuleVerdict, Store,
};

use crate::support::RedisServer;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;

/// Both stores on one clock.
struct Pair {
    memory: MemoryStore,
    redis: RedisStore,
    clock: ManualClock,
    server: RedisServer,
}

impl Pair {
    fn new() -> Self {
        let server = RedisServer::start();
        let clock = ManualClock::new(T0);
        Pair {
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            redis: RedisStore::builder(&server.url())
                .clock(clock.clone())
                .build()
                .unwrap(),
            clock,
            server,
        }
    }

    /// The same request to both stores; their decisions must be equal.
    async fn check(&self, key: &str, policy: &Policy, cost: u32) -> Decision {
        let key = Key::from(key);
        let memory = self.memory.check(&key, policy, cost).await.unwrap();
        let redis = self.redis.check(&key, policy, cost).await.unwrap();
        assert_eq!(
            redis,
            memory,
            "Redis and memory disagree at +{} µs on {key:?}, cost {cost}",
            self.now() - T0
        );
        redis
    }

    fn now(&self) -> u64 {
        self.clock.now_micros()
    }

    fn advance_us(&self, us: u64) {
        self.clock.advance(Duration::from_micros(us));
    }
}

fn fixed_window() -> Policy {
    Policy::try_from(Rule::fixed_window(
        "fw",
        Quota::new(5, Duration::from_secs(10)),
    ))
    .unwrap()
}

fn gcra() -> Policy {
    Policy::try_from(Rule::gcra("gcra", Quota::new(3, Duration::from_secs(10)))).unwrap()
}

fn expect(
    policy: &Policy,
    outcome: Outcome,
    remaining: u64,
    used: u64,
    reset_us: u64,
    retry_us: u64,
) -> Decision {
    Decision::from_verdicts(
        policy,
        &[RuleVerdict::new(
            outcome,
            remaining,
            used,
            Duration::from_micros(reset_us),
            Duration::from_micros(retry_us),
        )],
    )
}

#[tokio::test]
async fn fixed_window_resets_identically_at_the_end_of_the_window() {
    let stores = Pair::new();
    let policy = fixed_window();
    stores.advance_us(3_250_000);
    for used in 1..=5 {
        assert_eq!(
            stores.check("k", &policy, 1).await,
            expect(&policy, Outcome::Allowed, 5 - used, used, 10_000_000, 0)
        );
    }
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Denied, 0, 5, 10_000_000, 10_000_000)
    );
    for step in [1_000_000, 4_000_000, 4_999_000] {
        stores.advance_us(step);
        assert_eq!(
            stores.check("k", &policy, 1).await.outcome(),
            Outcome::Denied
        );
    }
    // 1 µs before the end.
    stores.advance_us(999);
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Denied, 0, 5, 1, 1)
    );
    stores.advance_us(1);
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
    // The state in Redis is one hash for the key, with a TTL.
    let keys = stores.server.keys();
    assert_eq!(keys, ["ratelimit:fw:fw-10s:{k}"]);
    let ttl: i64 = stores.server.cli(&["PTTL", &keys[0]]).parse().unwrap();
    assert!(ttl > 0, "every key has a TTL: {ttl}");
}

#[tokio::test]
async fn gcra_burst_spacing_and_retry_after_agree() {
    let stores = Pair::new();
    let policy = gcra();
    let burst = [
        stores.check("k", &policy, 1).await,
        stores.check("k", &policy, 1).await,
        stores.check("k", &policy, 1).await,
        stores.check("k", &policy, 1).await,
    ];
    assert_eq!(
        burst,
        [
            expect(&policy, Outcome::Allowed, 2, 1, 3_333_334, 0),
            expect(&policy, Outcome::Allowed, 1, 2, 6_666_667, 0),
            expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0),
            expect(&policy, Outcome::Denied, 0, 3, 10_000_000, 3_333_334),
        ]
    );
    // The greedy client: one microsecond early is refused, exactly on time is admitted.
    let mut admitted_at = Vec::new();
    while admitted_at.len() < 9 {
        let denied = stores.check("k", &policy, 1).await;
        assert_eq!(denied.outcome(), Outcome::Denied);
        let wait = u64::try_from(denied.retry_after().unwrap().as_micros()).unwrap();
        stores.advance_us(wait - 1);
        let early = stores.check("k", &policy, 1).await;
        assert_eq!(early.retry_after(), Some(Duration::from_micros(1)));
        stores.advance_us(1);
        assert!(stores.check("k", &policy, 1).await.is_allowed());
        admitted_at.push(stores.now() - T0);
    }
    let expected: Vec<u64> = (1..=9u64).map(|k| (k * 10_000_000).div_ceil(3)).collect();
    assert_eq!(admitted_at, expected);
}

#[tokio::test]
async fn never_and_peeks_agree() {
    let stores = Pair::new();
    let policy = gcra();
    assert_eq!(
        stores.check("k", &policy, 4).await,
        expect(&policy, Outcome::Never, 3, 0, 0, 0)
    );
    assert_eq!(
        stores.check("k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 3, 0, 0, 0)
    );
    assert!(stores.server.keys().is_empty(), "neither wrote anything");
    assert!(stores.check("k", &policy, 2).await.is_allowed());
    stores.advance_us(1_000_000);
    for _ in 0..3 {
        assert_eq!(
            stores.check("k", &policy, 0).await,
            expect(&policy, Outcome::Allowed, 1, 2, 5_666_667, 0)
        );
    }
    assert_eq!(
        stores.check("k", &policy, 4).await,
        expect(&policy, Outcome::Never, 1, 2, 5_666_667, 0)
    );
    let fw = fixed_window();
    assert_eq!(
        stores.check("k", &fw, 6).await,
        expect(&fw, Outcome::Never, 5, 0, 10_000_000, 0)
    );
    assert_eq!(
        stores.check("k", &fw, 0).await,
        expect(&fw, Outcome::Allowed, 5, 0, 10_000_000, 0)
    );
    assert_eq!(stores.server.keys(), ["ratelimit:gcra:gcra-3/10s:{k}"]);
}

#[tokio::test]
async fn multi_rule_all_or_nothing_agrees() {
    let stores = Pair::new();
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

/// A few thousand random steps (times, keys, costs, policies) against both stores.
#[tokio::test]
async fn random_scenarios_agree_step_by_step() {
    let stores = Pair::new();
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
