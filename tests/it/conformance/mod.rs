//! The conformance suite: one table of scenarios, per algorithm and edge case, run against the
//! `MemoryStore` and the `RedisStore` on one `ManualClock` (the Redis script then takes the
//! caller's time instead of reading `TIME`).
//!
//! Every request of every scenario must get the same `Decision` from both stores, and that
//! decision must be the one the table states (outcome, remaining, used, full_after, retry_after,
//! and for multi-rule policies which rule is reported). On Redis, each request is also checked for
//! what it does to the data: a request that is not admitted with a cost (a denial, a request that
//! can never pass, a cost-0 peek) writes nothing, every key written carries a TTL, and the keys
//! written are exactly `RedisStore::state_keys`.
//!
//! Every other request asks for each rule's verdict as well (`Store::check_verdicts`): both
//! stores must give the same verdicts, the reported rule's telling what the decision does;
//! `verdicts` holds what a refused request's other rules tell.
//!
//! A second table changes a rule's quota under the same name between phases of requests, for every
//! algorithm, and holds both stores to the same decisions across the change.
//!
//! Arrival times are µs after `T0`, midnight UTC, so epoch-aligned sub-intervals of every size
//! used here start at `T0`. A time may be earlier than the one before: the clock went back.
//!
//! The tables are kept by algorithm (`fixed_window`, `sliding_log`, `sliding_window`, `buckets`,
//! `multi_rule`); `stores` runs them, and `coverage` holds the tables to covering every edge case.

mod buckets;
mod coverage;
mod fixed_window;
mod multi_rule;
mod sliding_log;
mod sliding_window;
mod stores;
mod verdicts;

use std::collections::BTreeSet;
use std::time::Duration;

use tower_redis_ratelimit::{Quota, Rule};

use tower_redis_ratelimit::decision::Outcome;

use self::stores::Stores;
use crate::support::RedisServer;
use tower_redis_ratelimit::policy::MAX_PERIOD;

/// 2023-11-14T00:00:00Z, in µs: a whole number of days.
const T0: u64 = 1_699_920_000_000_000;
const MS: u64 = 1_000;
const S: u64 = 1_000_000;
const MIN: u64 = 60 * S;
const DAY: u64 = 86_400 * S;
const TEN_YEARS: u64 = MAX_PERIOD.as_micros() as u64;
const BILLION: u32 = 1_000_000_000;

#[derive(Clone, Copy, Debug)]
enum Algo {
    FixedWindow,
    SlidingLog,
    SlidingWindow(u16),
    TokenBucket,
    Gcra,
}

/// A rule, in a form a `const` table can hold.
#[derive(Clone, Copy, Debug)]
struct RuleSpec {
    name: &'static str,
    algo: Algo,
    limit: u32,
    period_us: u64,
    burst: Option<u32>,
    /// The rule's `max_delay` in µs; 0 for none.
    max_delay_us: u64,
}

const fn rule(name: &'static str, algo: Algo, limit: u32, period_us: u64) -> RuleSpec {
    RuleSpec {
        name,
        algo,
        limit,
        period_us,
        burst: None,
        max_delay_us: 0,
    }
}

const fn bucket(algo: Algo, limit: u32, period_us: u64, burst: u32) -> RuleSpec {
    RuleSpec {
        name: "bucket",
        algo,
        limit,
        period_us,
        burst: Some(burst),
        max_delay_us: 0,
    }
}

impl RuleSpec {
    /// The same rule, admitting requests to wait up to `max_delay_us`.
    const fn delaying(mut self, max_delay_us: u64) -> RuleSpec {
        self.max_delay_us = max_delay_us;
        self
    }
}

impl RuleSpec {
    /// The longest a request's state can matter (µs): a full bucket's drain time, else the
    /// period. State further ahead of the clock than this is not the rule's own.
    fn span(&self) -> u64 {
        match self.algo {
            Algo::TokenBucket | Algo::Gcra => {
                let units = u128::from(self.capacity()) * u128::from(self.period_us);
                u64::try_from(units.div_ceil(u128::from(self.limit)))
                    .expect("a drain time in µs fits in a u64")
            }
            _ => self.period_us,
        }
    }

    /// What the rule can hold at once: the burst of a bucket, else the limit.
    fn capacity(&self) -> u32 {
        match self.algo {
            Algo::TokenBucket | Algo::Gcra => self.burst.unwrap_or(self.limit),
            _ => self.limit,
        }
    }

    fn rule(&self) -> Rule {
        let mut quota = Quota::new(self.limit, Duration::from_micros(self.period_us));
        if let Some(burst) = self.burst {
            quota = quota.with_burst(burst);
        }
        let rule = match self.algo {
            Algo::FixedWindow => Rule::fixed_window(self.name, quota),
            Algo::SlidingLog => Rule::sliding_log(self.name, quota),
            Algo::SlidingWindow(n) => Rule::sliding_window(self.name, quota, n),
            Algo::TokenBucket => Rule::token_bucket(self.name, quota),
            Algo::Gcra => Rule::gcra(self.name, quota),
        };
        match self.max_delay_us {
            0 => rule,
            us => rule.with_max_delay(Duration::from_micros(us)),
        }
    }
}

/// One request and the decision it must get.
#[derive(Clone, Copy, Debug)]
struct Req {
    /// µs after `T0`.
    at: u64,
    cost: u32,
    outcome: Outcome,
    remaining: u64,
    used: u64,
    full_after: u64,
    /// 0 unless denied.
    retry_after: u64,
    /// How long an admitted request waits before it is served: 0 unless a rule with a
    /// `max_delay` queued it.
    delay: u64,
    /// The reported rule (multi-rule policies).
    rule: usize,
}

const fn allow(at: u64, cost: u32, remaining: u64, used: u64, full_after: u64) -> Req {
    Req {
        at,
        cost,
        outcome: Outcome::Allowed,
        remaining,
        used,
        full_after,
        retry_after: 0,
        delay: 0,
        rule: 0,
    }
}

const fn deny(at: u64, cost: u32, remaining: u64, used: u64, reset: u64, retry: u64) -> Req {
    Req {
        at,
        cost,
        outcome: Outcome::Denied,
        remaining,
        used,
        full_after: reset,
        retry_after: retry,
        delay: 0,
        rule: 0,
    }
}

const fn never(at: u64, cost: u32, remaining: u64, used: u64, full_after: u64) -> Req {
    Req {
        at,
        cost,
        outcome: Outcome::Never,
        remaining,
        used,
        full_after,
        retry_after: 0,
        delay: 0,
        rule: 0,
    }
}

impl Req {
    /// The same admission, served after waiting `delay` µs.
    const fn waiting(mut self, delay: u64) -> Req {
        self.delay = delay;
        self
    }

    const fn reported(mut self, rule: usize) -> Req {
        self.rule = rule;
        self
    }
}

struct Scenario {
    name: &'static str,
    rules: &'static [RuleSpec],
    requests: &'static [Req],
}

// A rule's quota changing under the same name:
//
// Each phase runs under its own policy, on the same stores, clock and client key, so it sees what
// the earlier phases left. A change of what the state is counted in (a period, a bucket's rate,
// sub-intervals) names another key: the new quota starts fresh and the old state waits, untouched,
// for its TTL. A new limit (windows) or burst (buckets) keeps the key and reads the state as it is.

/// One quota of a rule, and the requests made under it.
struct Phase {
    rules: &'static [RuleSpec],
    requests: &'static [Req],
}

struct QuotaChange {
    name: &'static str,
    phases: &'static [Phase],
}

const fn phase(rules: &'static [RuleSpec], requests: &'static [Req]) -> Phase {
    Phase { rules, requests }
}

/// Every scenario, algorithm by algorithm.
fn scenarios() -> impl Iterator<Item = &'static Scenario> + Clone {
    [
        fixed_window::SCENARIOS,
        sliding_log::SCENARIOS,
        sliding_window::SCENARIOS,
        buckets::SCENARIOS,
        multi_rule::SCENARIOS,
    ]
    .into_iter()
    .flatten()
}

/// Every change of quota, algorithm by algorithm.
fn quota_changes() -> impl Iterator<Item = &'static QuotaChange> + Clone {
    [
        fixed_window::QUOTA_CHANGES,
        sliding_log::QUOTA_CHANGES,
        sliding_window::QUOTA_CHANGES,
        buckets::QUOTA_CHANGES,
    ]
    .into_iter()
    .flatten()
}

#[tokio::test]
async fn every_scenario_decides_identically_on_both_stores_and_as_the_table_says() {
    let server = RedisServer::start();
    let mut failures = Vec::new();
    let mut names = BTreeSet::new();
    for scenario in scenarios() {
        assert!(names.insert(scenario.name), "{} twice", scenario.name);
        let mut stores = Stores::new(&server, scenario.name).await;
        if let Err(problem) = stores.run(scenario).await {
            failures.push(format!("{}: {problem}", scenario.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        scenarios().count(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn quota_changes_under_the_same_name_decide_identically_on_both_stores() {
    let server = RedisServer::start();
    let mut failures = Vec::new();
    for change in quota_changes() {
        let mut stores = Stores::new(&server, change.name).await;
        if let Err(problem) = stores.run_change(change).await {
            failures.push(format!("{}: {problem}", change.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} quota changes failed:\n{}",
        failures.len(),
        quota_changes().count(),
        failures.join("\n")
    );
}
