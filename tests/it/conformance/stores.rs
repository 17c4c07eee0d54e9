//! Runs the tables: every request on both stores, on one clock, checking the decisions and what
//! Redis holds after each.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::{QuotaChange, Req, RuleSpec, Scenario, T0};
use crate::support::RedisServer;
use redis::aio::MultiplexedConnection;
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::{Outcome, RuleVerdict};
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, MemoryStore, Policy, RedisStore, Store};

/// A scenario's stores, on one clock, and a plain connection to inspect Redis.
pub(super) struct Stores {
    clock: ManualClock,
    memory: MemoryStore,
    redis: RedisStore,
    probe: MultiplexedConnection,
    prefix: &'static str,
}

impl Stores {
    pub(super) async fn new(server: &RedisServer, prefix: &'static str) -> Self {
        let clock = ManualClock::new(T0);
        let probe = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Stores {
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            redis: RedisStore::builder(&server.url())
                .prefix(prefix)
                .clock(clock.clone())
                .build()
                .unwrap(),
            clock,
            probe,
            prefix,
        }
    }

    /// Redis's count of writes since start: any write, even a TTL refresh alone, moves it.
    async fn writes(&mut self) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query_async(&mut self.probe)
            .await
            .unwrap();
        info.lines()
            .find_map(|line| line.trim().strip_prefix("rdb_changes_since_last_save:"))
            .expect("rdb_changes_since_last_save in INFO")
            .parse()
            .unwrap()
    }

    /// The keys under this scenario's prefix, and any of them without a TTL.
    async fn keys(&mut self) -> (BTreeSet<String>, Vec<String>) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
            .query_async(&mut self.probe)
            .await
            .unwrap();
        let mut immortal = Vec::new();
        for key in &keys {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut self.probe)
                .await
                .unwrap();
            if ttl <= 0 {
                immortal.push(format!("{key} (PTTL {ttl})"));
            }
        }
        (keys.into_iter().collect(), immortal)
    }

    /// Runs every request of `scenario`; the first problem ends it.
    pub(super) async fn run(&mut self, scenario: &Scenario) -> Result<(), String> {
        self.run_phase(scenario.rules, scenario.requests, &mut BTreeSet::new())
            .await
    }

    /// Runs every phase of `change` in turn; the first problem ends it.
    pub(super) async fn run_change(&mut self, change: &QuotaChange) -> Result<(), String> {
        let mut state_keys = BTreeSet::new();
        for (index, phase) in change.phases.iter().enumerate() {
            self.run_phase(phase.rules, phase.requests, &mut state_keys)
                .await
                .map_err(|problem| format!("phase {index}: {problem}"))?;
        }
        Ok(())
    }

    /// Runs `requests` under a policy of `rules`. `state_keys` gathers the keys of every policy run
    /// so far on this client: a key written under an earlier quota may still be there.
    async fn run_phase(
        &mut self,
        rules: &[RuleSpec],
        requests: &[Req],
        state_keys: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        let policy = Policy::new(rules.iter().map(RuleSpec::rule))
            .map_err(|err| format!("the policy does not build: {err}"))?;
        let key = Key::from("client");
        state_keys.extend(self.redis.state_keys(&key, &policy));
        for (index, req) in requests.iter().enumerate() {
            let at = format!("request {index} (at +{} µs, cost {})", req.at, req.cost);
            self.clock.set(T0 + req.at);
            // Every other request asks for each rule's verdict too: both calls decide alike,
            // and the verdicts must agree as the decisions do.
            let verdicts = index % 2 == 1;
            let (memory, memory_rules) = if verdicts {
                let answer = Arc::new(self.memory.clone())
                    .check_verdicts(&key, &policy, req.cost)
                    .await
                    .unwrap();
                (answer.decision().clone(), answer.rules().to_vec())
            } else {
                let decision = self.memory.check(&key, &policy, req.cost).await.unwrap();
                (decision, Vec::new())
            };
            let writes_before = self.writes().await;
            let (redis, redis_rules) = if verdicts {
                let answer = Arc::new(self.redis.clone())
                    .check_verdicts(&key, &policy, req.cost)
                    .await
                    .map_err(|err| format!("{at}: Redis failed: {err}"))?;
                (answer.decision().clone(), answer.rules().to_vec())
            } else {
                let decision = self
                    .redis
                    .check(&key, &policy, req.cost)
                    .await
                    .map_err(|err| format!("{at}: Redis failed: {err}"))?;
                (decision, Vec::new())
            };
            let writes = self.writes().await - writes_before;
            if memory != redis {
                return Err(format!(
                    "{at}: the stores disagree\n  memory: {memory:?}\n  redis:  {redis:?}"
                ));
            }
            if memory_rules != redis_rules {
                return Err(format!(
                    "{at}: the stores' rule verdicts disagree\n  memory: {memory_rules:?}\n  redis:  {redis_rules:?}"
                ));
            }
            if verdicts && let Some(difference) = unreported(&redis, &redis_rules, &policy) {
                return Err(format!("{at}: {difference}"));
            }
            if let Some(difference) = unexpected(&redis, req) {
                return Err(format!("{at}: {difference}\n  got: {redis:?}"));
            }
            let writing = req.outcome == Outcome::Allowed && req.cost > 0;
            if !writing && writes != 0 {
                return Err(format!("{at}: wrote {writes} times without admitting"));
            }
            if writing && writes == 0 {
                return Err(format!("{at}: admitted without writing"));
            }
            let (keys, immortal) = self.keys().await;
            if !immortal.is_empty() {
                return Err(format!("{at}: keys without a TTL: {immortal:?}"));
            }
            if !keys.is_subset(state_keys) {
                return Err(format!(
                    "{at}: wrote {keys:?}, but state_keys says {state_keys:?}"
                ));
            }
        }
        Ok(())
    }
}

/// How `rules`, a decision's verdicts, fail to tell what `decision` tells of its reported rule,
/// or miss a rule of `policy`, if they do.
fn unreported(decision: &Decision, rules: &[RuleVerdict], policy: &Policy) -> Option<String> {
    if rules.len() != policy.rules().len() {
        return Some(format!(
            "{} verdicts for {} rules",
            rules.len(),
            policy.rules().len()
        ));
    }
    let own = &rules[decision.rule_index()];
    let told = (own.remaining(), own.used(), own.full_after());
    let reported = (decision.remaining(), decision.used(), decision.full_after());
    // A refused request's reported rule refused it: its counts are the decision's.
    let same_rule = decision.is_allowed() || own.outcome() != Outcome::Allowed;
    (same_rule && told != reported)
        .then(|| format!("the reported rule's verdict says {told:?}, the decision {reported:?}"))
}

/// How `decision` differs from what the table expects, if it does.
fn unexpected(decision: &Decision, req: &Req) -> Option<String> {
    let retry_after =
        (req.outcome == Outcome::Denied).then(|| Duration::from_micros(req.retry_after));
    let expected = (
        req.outcome,
        req.rule,
        req.remaining,
        req.used,
        Duration::from_micros(req.full_after),
        retry_after,
        Duration::from_micros(req.delay),
    );
    let got = (
        decision.outcome(),
        decision.rule_index(),
        decision.remaining(),
        decision.used(),
        decision.full_after(),
        decision.retry_after(),
        decision.delay(),
    );
    (got != expected).then(|| {
        format!(
            "expected (outcome, rule, remaining, used, full_after, retry_after, delay) = {expected:?}, got {got:?}"
        )
    })
}
