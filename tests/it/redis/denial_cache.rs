//! The denial cache: a key Redis denied until T is answered in process until T, with Redis's own
//! decision, so an abusive client costs Redis about one call per retry period; and a store that
//! remembers denials decides exactly as one that asks Redis every time.

use std::time::Duration;

use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

use crate::support::RedisServer;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

fn store(server: &RedisServer, prefix: &str, clock: &ManualClock, cache: usize) -> RedisStore {
    RedisStore::builder(&server.url())
        .prefix(prefix)
        .clock(clock.clone())
        .denial_cache(cache)
        .build()
        .unwrap()
}

async fn check(
    store: &RedisStore,
    key: &str,
    policy: &Policy,
    cost: u32,
) -> tower_redis_ratelimit::Decision {
    store.check(&Key::from(key), policy, cost).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abusive_key_costs_redis_one_call_per_retry_period() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let store = store(&server, "cached", &clock, 1_000);
    let policy = Policy::try_from(Rule::fixed_window(
        "api",
        Quota::new(5, Duration::from_secs(10)),
    ))
    .unwrap();
    // The first call also loads the script (a NOSCRIPT answer, then EVALSHA again): count from
    // after it.
    assert!(check(&store, "abuser", &policy, 1).await.is_allowed());
    let start = server.script_calls();
    for _ in 0..4 {
        assert!(check(&store, "abuser", &policy, 1).await.is_allowed());
    }
    assert_eq!(server.script_calls() - start, 4);
    // The first denial asks Redis; a thousand more each second, until the window ends, do not.
    for second in 0..5 {
        for _ in 0..1_000 {
            assert!(!check(&store, "abuser", &policy, 1).await.is_allowed());
        }
        clock.advance(Duration::from_secs(1));
        assert_eq!(server.script_calls() - start, 5, "after {} s", second + 1);
    }
    // A request of another cost, or of another key, asks Redis.
    assert!(!check(&store, "abuser", &policy, 2).await.is_allowed());
    assert!(check(&store, "another", &policy, 1).await.is_allowed());
    assert_eq!(server.script_calls() - start, 7);
    // The window ends: the key asks Redis again, and is admitted.
    clock.set(T0 + 10 * SECOND);
    assert!(check(&store, "abuser", &policy, 1).await.is_allowed());
    assert_eq!(server.script_calls() - start, 8);
}

/// A small deterministic generator (xorshift64*), so a failing trace can be replayed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Policies that deny often in the traces below: small limits, every algorithm, and rules of
/// several algorithms together.
fn policies() -> Vec<Policy> {
    let ten_s = Duration::from_secs(10);
    let single = [
        Rule::fixed_window("fw", Quota::new(3, ten_s)),
        Rule::sliding_log("log", Quota::new(3, ten_s)),
        Rule::sliding_window("sw", Quota::new(4, ten_s), 5),
        Rule::token_bucket("tb", Quota::new(2, Duration::from_secs(4)).with_burst(3)),
        Rule::gcra("gcra", Quota::new(2, Duration::from_secs(4)).with_burst(3)),
    ];
    let mut policies: Vec<Policy> = single
        .into_iter()
        .map(|rule| Policy::try_from(rule).unwrap())
        .collect();
    policies.push(
        Policy::new([
            Rule::gcra("burst", Quota::new(5, Duration::from_secs(5)).with_burst(2)),
            Rule::fixed_window("window", Quota::new(6, Duration::from_secs(20))),
            Rule::sliding_log("log", Quota::new(4, Duration::from_secs(15))),
        ])
        .unwrap(),
    );
    policies
}

/// One request of a trace: how far the clock moves first, which policy, key and cost.
struct Step {
    advance: u64,
    policy: usize,
    key: &'static str,
    cost: u32,
}

/// A trace dense enough that keys are often denied and then asked again within their wait.
fn trace(random: &mut Random, policies: usize, steps: usize) -> Vec<Step> {
    (0..steps)
        .map(|_| Step {
            advance: match random.below(20) {
                0 => random.below(20 * SECOND),
                1..=10 => 0,
                _ => random.below(SECOND / 5),
            },
            policy: random.below(policies as u64) as usize,
            key: ["a", "b"][random.below(2) as usize],
            cost: match random.below(10) {
                0 => 0,
                1 => 2,
                _ => 1,
            },
        })
        .collect()
}

/// Runs `trace` on `store` from `T0`, answering every decision.
async fn run(
    store: &RedisStore,
    clock: &ManualClock,
    policies: &[Policy],
    trace: &[Step],
) -> Vec<tower_redis_ratelimit::Decision> {
    clock.set(T0);
    let mut decisions = Vec::with_capacity(trace.len());
    for step in trace {
        clock.advance(Duration::from_micros(step.advance));
        decisions.push(check(store, step.key, &policies[step.policy], step.cost).await);
    }
    decisions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_store_decides_exactly_as_an_uncached_one_on_random_traces() {
    let server = RedisServer::start();
    let clock = ManualClock::new(T0);
    let policies = policies();
    let mut random = Random(0x5eed_1234_abcd_0001);
    for round in 0..3 {
        let trace = trace(&mut random, policies.len(), 3_000);
        let uncached = store(&server, &format!("uncached{round}"), &clock, 0);
        let cached = store(&server, &format!("cached{round}"), &clock, 1_000);
        // Each store's first call also loads the script: take it out of the count.
        let before = server.script_calls();
        let expected = run(&uncached, &clock, &policies, &trace).await;
        let asked = server.script_calls() - before;
        let before = server.script_calls();
        let answers = run(&cached, &clock, &policies, &trace).await;
        let cached_asked = server.script_calls() - before;
        for (index, (answer, expected)) in answers.iter().zip(&expected).enumerate() {
            let step = &trace[index];
            // The rules that refused, which a 429's `violated-policies` names, are compared too
            // (`Decision`'s equality leaves them out).
            assert_eq!(
                (answer, answer.refused_by().collect::<Vec<_>>()),
                (expected, expected.refused_by().collect::<Vec<_>>()),
                "round {round}, step {index}: {:?} cost {} under {:?}",
                step.key,
                step.cost,
                policies[step.policy].rules()
            );
        }
        // The trace met remembered denials often enough for the comparison to mean something.
        let denied = expected.iter().filter(|d| !d.is_allowed()).count() as u64;
        let local = asked - cached_asked;
        assert!(
            denied > 500 && local > 200,
            "round {round}: {local} of {denied} denials answered without Redis"
        );
    }
}
