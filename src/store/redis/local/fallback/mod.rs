//! Graceful degradation: while Redis fails, decisions come from a local [`MemoryStore`] with each
//! quota divided by the number of instances, marked as degraded; a circuit breaker keeps calls
//! away from a failing Redis and lets one probe find it back.

mod breaker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use self::breaker::Breaker;
pub(in crate::store::redis) use self::breaker::Pass;
use crate::decision::Decision;
use crate::error::{ConfigError, StoreConfigError};
use crate::key::Key;
use crate::policy::{Policy, Rule};
use crate::quota::Quota;
use crate::store::redis::Inner;
use crate::store::redis::local::Answer;
use crate::store::{MemoryStore, Store, StoreErrorKind, StoreFuture};
use crate::sync::lock;

/// How many divided policies are kept; a process has a few (one per layer), so this only bounds
/// a pathological one that makes policies per request, which then divides per call.
const MAX_POLICIES: usize = 1_024;

/// Settings for a Redis store's fallback, given to
/// [`RedisStoreBuilder::fallback`](crate::store::redis::RedisStoreBuilder::fallback).
///
/// ```
/// use std::time::Duration;
/// use tower_redis_ratelimit::store::{Fallback, RedisStore};
///
/// // Six replicas share the limits: while Redis fails, each admits a sixth of every quota.
/// let store = RedisStore::builder("redis://127.0.0.1:6379")
///     .fallback(Fallback::new(6).timeout(Duration::from_millis(30)))
///     .build()?;
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Fallback {
    pub(crate) instances: u32,
    pub(crate) timeout: Duration,
    pub(crate) failures: u32,
    pub(crate) cool_down: Duration,
}

impl Fallback {
    /// A fallback for a service of `instances` replicas sharing the limits (at least 1): while
    /// Redis fails, each decides locally with every quota (limit and burst) divided by this,
    /// rounded down, at least 1. Redis calls then wait at most 50 ms; 3 failures in a row stop
    /// calls for a 1 s cool-down.
    pub fn new(instances: u32) -> Self {
        Self {
            instances,
            timeout: Duration::from_millis(50),
            failures: 3,
            cool_down: Duration::from_secs(1),
        }
    }

    /// How long a Redis call may take before the fallback answers instead (default 50 ms). It
    /// must be below the deadline of every rate limit on the store (100 ms by default), or the
    /// deadline would answer first, with the layer's failure mode: building such a layer fails
    /// with [`ConfigError::FallbackAfterDeadline`], which names both.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many failed (or timed-out) Redis calls in a row stop calling Redis (default 3).
    pub fn failures(mut self, failures: u32) -> Self {
        self.failures = failures;
        self
    }

    /// How long no call goes to Redis once it has failed that often, before one call probes it
    /// (default 1 s); a failed probe starts another cool-down.
    pub fn cool_down(mut self, cool_down: Duration) -> Self {
        self.cool_down = cool_down;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |error: StoreConfigError| Err(error.into());
        if self.instances == 0 {
            return invalid(StoreConfigError::FallbackInstances);
        }
        if self.timeout.is_zero() {
            return invalid(StoreConfigError::FallbackTimeout);
        }
        if self.failures == 0 {
            return invalid(StoreConfigError::FallbackFailures);
        }
        if self.cool_down.is_zero() {
            return invalid(StoreConfigError::FallbackCoolDown);
        }
        Ok(())
    }
}

/// The fallback of one store: the local store, the divided policies, the breaker.
pub(in crate::store::redis) struct Degraded {
    memory: MemoryStore,
    divided: Mutex<HashMap<Box<[u64]>, Policy>>,
    breaker: Breaker,
    instances: u32,
    timeout: Duration,
}

impl Degraded {
    pub(in crate::store::redis) fn new(settings: &Fallback, memory: MemoryStore) -> Self {
        Self {
            memory,
            divided: Mutex::new(HashMap::new()),
            breaker: Breaker::new(settings.failures, settings.cool_down),
            instances: settings.instances,
            timeout: settings.timeout,
        }
    }

    /// The local decision, on `policy` divided among the instances.
    fn answer(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        crate::telemetry::fallback();
        let divided = self.divide(policy);
        let mut answer = self.memory.check(key, &divided, cost);
        match answer.take_ready() {
            Some(result) => StoreFuture::ready(result.map(Decision::degraded)),
            None => StoreFuture::new(async move { answer.await.map(Decision::degraded) }),
        }
    }

    /// Forgets the local counts of `key` under `policy` (a reset).
    pub(in crate::store::redis) fn reset(&self, key: &Key, policy: &Policy) {
        // The memory store resets at once.
        drop(self.memory.reset(key, &self.divide(policy)));
    }

    /// How long a Redis call may take before the fallback answers.
    pub(in crate::store::redis) fn timeout(&self) -> Duration {
        self.timeout
    }

    fn divide(&self, policy: &Policy) -> Policy {
        let mut divided = lock(&self.divided);
        if let Some(found) = divided.get(policy.rule_ids()) {
            return found.clone();
        }
        let instances = self.instances;
        let rules = policy.rules().iter().map(|rule| {
            let quota = rule.quota();
            let share = |n: u32| (n / instances).max(1);
            let quota =
                Quota::new(share(quota.limit()), quota.period()).with_burst(share(quota.burst()));
            Rule::new(rule.name().to_owned(), rule.algorithm(), quota)
        });
        // A divided quota is still valid: smaller counts, the same periods.
        let result = Policy::new(rules).unwrap_or_else(|_| policy.clone());
        if divided.len() < MAX_POLICIES {
            divided.insert(policy.rule_ids().into(), result.clone());
        }
        result
    }
}

/// Whether `inner`'s fallback answers at once (its breaker is open): then the answer.
pub(in crate::store::redis) fn instead(
    inner: &Inner,
    key: &Key,
    policy: &Policy,
    cost: u32,
) -> Result<Pass, StoreFuture<Decision>> {
    let Some(degraded) = &inner.fallback else {
        return Ok(Pass::Call);
    };
    match degraded.breaker.pass(Instant::now()) {
        Pass::Refuse => Err(degraded.answer(key, policy, cost)),
        pass => Ok(pass),
    }
}

/// `decided`, Redis's answer, bounded by the fallback's timeout and answered by the fallback
/// when it fails; its outcome goes to the breaker. Without a fallback, `decided` as it is.
pub(in crate::store::redis) fn guard<A: Answer>(
    inner: &Arc<Inner>,
    mut decided: StoreFuture<A>,
    pass: Pass,
    key: &Key,
    policy: &Policy,
    cost: u32,
) -> StoreFuture<A> {
    if inner.fallback.is_none() {
        return decided;
    }
    // Answered in process (a quota lease): Redis was not asked, so there is nothing to learn.
    if let Some(result) = decided.take_ready() {
        return StoreFuture::ready(result);
    }
    let (inner, key, policy) = (inner.clone(), key.clone(), policy.clone());
    StoreFuture::new(async move {
        let degraded = inner.fallback.as_ref().expect("checked above");
        let mut report = Report {
            breaker: &degraded.breaker,
            probe: pass == Pass::Probe,
            reported: false,
        };
        let failed = match tokio::time::timeout(degraded.timeout, decided).await {
            Ok(Ok(decision)) => {
                report.succeeded();
                return Ok(decision);
            }
            Ok(Err(err)) => err.kind(),
            Err(_) => StoreErrorKind::Timeout,
        };
        // Counted here, since the layer sees an answer: an outage must show in the store errors
        // whatever answers in Redis's place (the documented alert watches them).
        crate::telemetry::store_error(crate::telemetry::RATE_LIMITING, failed.as_str());
        report.failed();
        degraded.answer(&key, &policy, cost).await.map(A::decided)
    })
}

/// Reports a call's outcome to the breaker once; a call dropped before it had one (its caller
/// gave up at the deadline) reports a failure, so an abandoned probe does not leave the breaker
/// waiting for it forever.
struct Report<'a> {
    breaker: &'a Breaker,
    probe: bool,
    reported: bool,
}

impl Report<'_> {
    fn succeeded(&mut self) {
        self.reported = true;
        self.breaker.succeeded();
    }

    fn failed(&mut self) {
        self.reported = true;
        self.breaker.failed(Instant::now(), self.probe);
    }
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if !self.reported {
            self.breaker.failed(Instant::now(), self.probe);
        }
    }
}
