//! Runs traces on both stores and on the reference models, and checks that they covered what a
//! property needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::models::{Expected, Model, Prediction, expected_decision, reported};
use super::strategies::{Spec, trace};
use super::{DAY, LATEST, T0};
use crate::support::RedisServer;
use futures_util::FutureExt;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{MemoryStore, Policy, RedisStore, Store};

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
        let mut now = start;
        let mut forward = true;
        for (index, &(advance, cost)) in trace.iter().enumerate() {
            forward &= advance >= 0;
            now = now.saturating_add_signed(advance).clamp(T0, LATEST);
            self.clock.set(now);
            // Asked outside the runtime, the memory store starts no background sweep: a sweep
            // in real time would drop state by the manual clock, which here also goes back.
            let memory = self
                .memory
                .check(&key, &policy, cost)
                .now_or_never()
                .expect("the memory store answers at once")
                .unwrap();
            let redis = self
                .runtime
                .block_on(self.redis.check(&key, &policy, cost))
                .unwrap();
            let offset = i128::from(now) - i128::from(start);
            prop_assert_eq!(
                &memory,
                &redis,
                "request {} (cost {}, at {:+} µs): memory and Redis disagree",
                index,
                cost,
                offset
            );
            if forward {
                let cost = u64::from(cost);
                let at = format!("request {index} (cost {cost}, at {offset:+} µs)");
                let predictions: Vec<Prediction> = models
                    .iter()
                    .map(|model| model.predict(now, cost))
                    .collect();
                if let [Prediction::Bounds(bounds)] = predictions.as_slice() {
                    bounds.check(&redis).map_err(|problem| {
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
                        reported(&redis),
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
                // The models follow what the stores admitted (identical to the models' own
                // verdicts where those are exact, checked above).
                if redis.is_allowed() && cost > 0 {
                    for model in &mut models {
                        model.admit(now, cost);
                    }
                }
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
