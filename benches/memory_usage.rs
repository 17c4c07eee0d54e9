//! Run with: cargo bench --bench memory_usage
//!
//! Measures how many bytes of Redis memory one client key costs under each algorithm. Starts its
//! own `redis-server` on a free port (it must be on PATH), fills one client's state per algorithm
//! to a typical level for a quota of 100 requests per minute through the real [`RedisStore`], and
//! prints `MEMORY USAGE <key> SAMPLES 0` (every element counted) summed over the rule's
//! [`RedisStore::state_keys`], as the markdown table in `docs/algorithms.md`.
//!
//! Time is driven by a [`ManualClock`], so the sliding window's requests land in every
//! sub-interval without waiting a minute. Numbers are for the Redis version on PATH with its
//! default encodings (listpack for small hashes and sorted sets); 64-bit Linux.

use std::time::Duration;

use testkit::commands::connect;
use testkit::{BoxError, RedisServer};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

/// One measured state: a rule and the requests that bring it to a typical level.
struct Case {
    state: &'static str,
    rule: Rule,
    /// This many requests, evenly spread over `span`.
    requests: u32,
    span: Duration,
}

fn cases() -> Vec<Case> {
    let quota = Quota::per_minute(100);
    let minute = Duration::from_secs(60);
    // Requests across a whole period plus one sub-interval, so that every sub-interval the
    // script keeps (`sub_intervals + 1` of them) has a count.
    let sliding = |sub_intervals: u16| Case {
        state: "100 requests over the last period and a sub-interval",
        rule: Rule::sliding_window("api", quota, sub_intervals),
        requests: 100,
        span: minute + minute / u32::from(sub_intervals),
    };
    vec![
        Case {
            state: "50 requests in the window",
            rule: Rule::fixed_window("api", quota),
            requests: 50,
            span: Duration::from_secs(30),
        },
        Case {
            state: "100 entries (a full log)",
            rule: Rule::sliding_log("api", quota),
            requests: 100,
            span: Duration::from_secs(59),
        },
        Case {
            state: "1,000 entries (a full log of a 1,000 per minute quota)",
            rule: Rule::sliding_log("api", Quota::per_minute(1_000)),
            requests: 1_000,
            span: Duration::from_secs(59),
        },
        sliding(1),
        sliding(10),
        sliding(60),
        Case {
            state: "50 requests taken",
            rule: Rule::token_bucket("api", quota),
            requests: 50,
            span: Duration::from_secs(10),
        },
        Case {
            state: "50 requests taken",
            rule: Rule::gcra("api", quota),
            requests: 50,
            span: Duration::from_secs(10),
        },
    ]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    if !testkit::run_by_cargo_bench("memory_usage") {
        return Ok(());
    }
    let server = RedisServer::try_start()?;
    let mut redis = connect(&server.url()).await?;
    let version: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut redis)
        .await?;
    let version = version
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .to_owned();

    let clock = ManualClock::starting_now();
    let store = RedisStore::builder(&server.url())
        .clock(clock.clone())
        .build()?;
    let client = Key::from("203.0.113.5");

    println!("Redis {version}; quota 100 requests per minute; client key `203.0.113.5`.\n");
    println!("| algorithm | state | Redis type | elements | bytes (`MEMORY USAGE`) |");
    println!("|---|---|---|---:|---:|");
    for case in cases() {
        let policy = Policy::new([case.rule.clone()])?;
        let gap = case.span / case.requests;
        for _ in 0..case.requests {
            store.check(&client, &policy, 1).await?;
            clock.advance(gap);
        }
        let (mut bytes, mut elements, mut kind) = (0u64, 0u64, String::new());
        for key in store.state_keys(&client, &policy) {
            let usage: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut redis)
                .await?;
            bytes += usage.ok_or_else(|| format!("the state key {key} was not written"))?;
            kind = redis::cmd("TYPE").arg(&key).query_async(&mut redis).await?;
            let length = match kind.as_str() {
                "hash" => "HLEN",
                "zset" => "ZCARD",
                _ => "STRLEN",
            };
            let count: u64 = redis::cmd(length).arg(&key).query_async(&mut redis).await?;
            elements += count;
            // Cases share the rule name; the next one starts from nothing.
            let _: u64 = redis::cmd("DEL").arg(&key).query_async(&mut redis).await?;
        }
        let unit = if kind == "string" { "bytes" } else { "fields" };
        let unit = if kind == "zset" { "entries" } else { unit };
        println!(
            "| {} | {} | {kind} | {elements} {unit} | {bytes} |",
            algorithm_name(&case.rule),
            case.state,
        );
    }
    Ok(())
}

fn algorithm_name(rule: &Rule) -> String {
    use tower_redis_ratelimit::policy::Algorithm;
    match rule.algorithm() {
        Algorithm::FixedWindow => "fixed window".to_owned(),
        Algorithm::SlidingLog => "sliding log".to_owned(),
        Algorithm::SlidingWindow { sub_intervals: 1 } => {
            "sliding window, 1 sub-interval".to_owned()
        }
        Algorithm::SlidingWindow { sub_intervals } => {
            format!("sliding window, {sub_intervals} sub-intervals")
        }
        Algorithm::TokenBucket => "token bucket".to_owned(),
        Algorithm::Gcra => "GCRA".to_owned(),
        other => format!("{other:?}"),
    }
}
