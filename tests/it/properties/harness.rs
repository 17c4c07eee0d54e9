//! Runs traces on both stores and on the reference models, and checks that they covered what a
//! property needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::models::{Expected, Model, Prediction, expected_decision, reported};
use super::strategies::{Spec, trace};
use super::{DAY, LATEST, T0};
use crate::support::RedisServer;
use futures_util::FutureExt;
use futures_util::future::join_all;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, MemoryStore, Policy, RedisStore, Store};

/// One Redis server for every property test: started by the first that needs it, stopped when
/// the last one still running lets go of it.
fn shared_server() -> Arc<RedisServer> {
    static SERVER: Mutex<Weak<RedisServer>> = Mutex::new(Weak::new());
    let mut slot = SERVER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let server = Arc::new(RedisServer::start());
    *slot = Arc::downgrade(&server);
    server
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    clock: ManualClock,
    memory: MemoryStore,
    redis: RedisStore,
    cases: AtomicU64,
    coverage: Coverage,
    _server: Arc<RedisServer>,
}

/// What the decisions checked against the models covered, so a property cannot pass vacuously.
#[derive(Debug, Default)]
struct Coverage {
    checked: AtomicU64,
    denied: AtomicU64,
    never: AtomicU64,
    /// Decisions of policies with several rules.
    several: AtomicU64,
    /// Several rules: a rule other than the first reported.
    later_rule: AtomicU64,
    /// Several rules: one denied (or could never admit) while another would have admitted.
    partial: AtomicU64,
    /// Several requests at one instant, sent to Redis together (one batch after the first).
    batched: AtomicU64,
}

impl Coverage {
    fn count(counter: &AtomicU64, happened: bool) {
        if happened {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

impl Harness {
    fn new(prefix: &str) -> Self {
        let server = shared_server();
        let clock = ManualClock::new(T0);
        Harness {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            memory: MemoryStore::builder().clock(clock.clone()).build(),
            redis: RedisStore::builder(&server.url())
                .prefix(prefix)
                .clock(clock.clone())
                .build()
                .unwrap(),
            clock,
            cases: AtomicU64::new(0),
            coverage: Coverage::default(),
            _server: server,
        }
    }

    /// Runs a trace on both stores (and the models while time runs forward), from `start`.
    fn run(&self, specs: &[Spec], start: u64, trace: &[(i64, u32)]) -> Result<(), TestCaseError> {
        let names = (0..specs.len()).map(|index| format!("r{index}"));
        let policy = Policy::new(specs.iter().zip(names).map(|(spec, name)| spec.rule(name)))
            .map_err(|err| TestCaseError::fail(format!("policy: {err}")))?;
        let mut models: Vec<Box<dyn Model>> = specs.iter().map(Spec::model).collect();
        // A fresh client key per case (shrinking reruns cases), so no case sees another's state.
        let key = Key::from(format!(
            "case-{}",
            self.cases.fetch_add(1, Ordering::Relaxed)
        ));
        // A second client in every batch, with requests of its own (cost 1), checked against the
        // memory store too: a batch's decisions must stay apart by key.
        let neighbour = Key::from(format!("{key:?}-neighbour"));
        let mut now = start;
        let mut forward = true;
        let mut index = 0;
        while index < trace.len() {
            let (advance, _) = trace[index];
            forward &= advance >= 0;
            now = now.saturating_add_signed(advance).clamp(T0, LATEST);
            self.clock.set(now);
            // The steps at this instant: this one, and every following one that does not move the
            // clock. The Redis store gets them at once (with the neighbour's between them), so
            // that they travel as one batch after the first; the memory store one by one.
            let end = index
                + 1
                + trace[index + 1..]
                    .iter()
                    .take_while(|(advance, _)| *advance == 0)
                    .count();
            let requests: Vec<(&Key, u32)> = trace[index..end]
                .iter()
                .flat_map(|&(_, cost)| [(&key, cost), (&neighbour, 1)])
                .collect();
            // Asked outside the runtime, the memory store starts no background sweep: a sweep
            // in real time would drop state by the manual clock, which here also goes back.
            let memory: Vec<Decision> = requests
                .iter()
                .map(|(key, cost)| {
                    self.memory
                        .check(key, &policy, *cost)
                        .now_or_never()
                        .expect("the memory store answers at once")
                        .unwrap()
                })
                .collect();
            let checks: Vec<_> = requests
                .iter()
                .map(|(key, cost)| self.redis.check(key, &policy, *cost))
                .collect();
            let redis: Vec<Decision> = self
                .runtime
                .block_on(join_all(checks))
                .into_iter()
                .map(Result::unwrap)
                .collect();
            Coverage::count(&self.coverage.batched, end - index > 1);
            for (step, (&(_, cost), pair)) in trace[index..end]
                .iter()
                .zip(memory.chunks_exact(2).zip(redis.chunks_exact(2)))
                .enumerate()
            {
                let (memory, redis) = pair;
                let offset = i128::from(now) - i128::from(start);
                prop_assert_eq!(
                    &memory[1],
                    &redis[1],
                    "request {} of the neighbour (at {:+} µs): memory and Redis disagree",
                    index + step,
                    offset
                );
                let redis = &redis[0];
                prop_assert_eq!(
                    &memory[0],
                    redis,
                    "request {} (cost {}, at {:+} µs): memory and Redis disagree",
                    index + step,
                    cost,
                    offset
                );
                if forward {
                    self.predict(&mut models, specs, (index + step, now, offset), cost, redis)?;
                }
            }
            index = end;
        }
        Ok(())
    }

    /// Checks the decision `redis` on a request of `cost` at step `at.0`, time `at.1` (`at.2` µs
    /// from the start) against the models, and has them follow what was admitted.
    fn predict(
        &self,
        models: &mut [Box<dyn Model>],
        specs: &[Spec],
        (index, now, offset): (usize, u64, i128),
        cost: u32,
        redis: &Decision,
    ) -> Result<(), TestCaseError> {
        let cost = u64::from(cost);
        let at = format!("request {index} (cost {cost}, at {offset:+} µs)");
        let predictions: Vec<Prediction> = models
            .iter()
            .map(|model| model.predict(now, cost))
            .collect();
        if let [Prediction::Bounds(bounds)] = predictions.as_slice() {
            bounds.check(redis).map_err(|problem| {
                TestCaseError::fail(format!("{at}: {problem}; got {redis:?}"))
            })?;
        } else {
            let verdicts = predictions
                .into_iter()
                .map(|prediction| match prediction {
                    Prediction::Exact(verdict) => Ok(verdict),
                    Prediction::Bounds(_) => Err(TestCaseError::fail(
                        "approximate windows are only drawn as single rules",
                    )),
                })
                .collect::<Result<Vec<Expected>, _>>()?;
            prop_assert_eq!(
                reported(redis),
                expected_decision(specs, &verdicts),
                "{}: the stores and the model disagree (outcome, rule, limit, remaining, \
                 used, reset, retry); model verdicts {:?}",
                at,
                verdicts
            );
            let admitting = verdicts.iter().any(|v| v.outcome == Outcome::Allowed);
            let coverage = &self.coverage;
            Coverage::count(&coverage.several, verdicts.len() > 1);
            Coverage::count(&coverage.later_rule, redis.rule_index() > 0);
            Coverage::count(&coverage.partial, admitting && !redis.is_allowed());
        }
        let coverage = &self.coverage;
        Coverage::count(&coverage.checked, true);
        Coverage::count(&coverage.denied, redis.outcome() == Outcome::Denied);
        Coverage::count(&coverage.never, redis.outcome() == Outcome::Never);
        // The models follow what the stores admitted (identical to the models' own verdicts
        // where those are exact, checked above).
        if redis.is_allowed() && cost > 0 {
            for model in models.iter_mut() {
                model.admit(now, cost);
            }
        }
        Ok(())
    }
}

/// Runs `cases` random traces for rules drawn from `specs`, and checks that they covered denials
/// and requests that can never pass (and, for several rules, reports of a rule other than the
/// first and requests denied by one rule that another would have admitted).
pub(super) fn check(name: &str, cases: u32, specs: impl Strategy<Value = Vec<Spec>>) {
    let harness = Harness::new(name);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let cases = specs.prop_flat_map(|specs| {
        let start = T0..T0 + 365 * DAY;
        let trace = trace(&specs);
        (Just(specs), start, trace)
    });
    let result = TestRunner::new(config).run(&cases, |(specs, start, trace)| {
        harness.run(&specs, start, &trace)
    });
    if let Err(err) = result {
        panic!("{name}: {err}");
    }
    let coverage = &harness.coverage;
    let mut missing = vec![
        ("a denial", &coverage.denied),
        ("a request that can never pass", &coverage.never),
        ("a batch of several requests", &coverage.batched),
    ];
    if Coverage::get(&coverage.several) > 0 {
        missing.push((
            "a report of a rule other than the first",
            &coverage.later_rule,
        ));
        missing.push((
            "a denial by one rule that another would have admitted",
            &coverage.partial,
        ));
    }
    missing.retain(|(_, counter)| Coverage::get(counter) == 0);
    assert!(
        missing.is_empty(),
        "{name}: {} decisions checked against the models, none was {:?}",
        Coverage::get(&coverage.checked),
        missing.iter().map(|(what, _)| what).collect::<Vec<_>>()
    );
}
