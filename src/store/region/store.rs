//! [`RegionStore`]: a region's Redis store that decides global policies from the allotments the
//! region holds, and every other policy as the store it wraps.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::allotment::Region;
use super::demand::Demand;
use super::global_key::GlobalKey;
use super::ledger::Ledger;
use super::partition::PartitionMode;
use super::shared::{NOT_DECLARED, Settings, Shared, UNKNOWN};
use super::window::{Spendable, spendable};
use crate::algorithm::{Outcome, RuleVerdict};
use crate::clock::{Clock, SystemClock, micros};
use crate::decision::Decision;
use crate::error::{ConfigError, StoreConfigError};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::redis::wrapped::StorageKey;
use crate::store::{RedisStore, Store, StoreError, StoreFuture};

/// The bound on clock skew of a region store whose builder is not told one
/// ([`RegionStoreBuilder::max_skew`]).
pub const DEFAULT_MAX_SKEW: Duration = Duration::from_millis(10);

/// A region's store: global policies ([`Policy::global`]) are decided in the region from the
/// allotments of their quota that the region holds, with one call to the region's own Redis
/// and no call across regions; every other policy is decided by the wrapped [`RedisStore`]
/// exactly as without it.
///
/// In the background, a task of each instance reports what its keys are asked to the region,
/// and the region's leading instance takes allotments from the [`Ledger`] as its demand grows
/// and gives back what it will not spend (see the module's docs for the design and its bound).
///
/// ```no_run
/// use std::time::Duration;
/// use tower_redis_ratelimit::key::HeaderKey;
/// use tower_redis_ratelimit::store::region::{Ledger, PartitionMode, RegionStore};
/// use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, RedisStore, Rule};
///
/// # fn build() -> Result<(), tower_redis_ratelimit::ConfigError> {
/// let ledger = Ledger::new(RedisStore::open("redis://ledger.internal:6379")?);
/// let store = RegionStore::builder("eu-west", RedisStore::open("redis://127.0.0.1:6379")?, ledger)
///     .partition(PartitionMode::Emergency { fraction: 0.1 })
///     .max_skew(Duration::from_millis(20))
///     .build()?;
/// let policy = Policy::global(Rule::fixed_window("api", Quota::per_minute(60_000)))?;
/// let layer = RateLimitLayer::builder()
///     .key(HeaderKey::new("x-customer"))
///     .store(store)
///     .policy(&policy)
///     .build()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RegionStore {
    shared: Arc<Shared>,
}

/// Settings of a [`RegionStore`].
#[must_use]
pub struct RegionStoreBuilder {
    name: String,
    local: RedisStore,
    ledger: Ledger,
    partition: PartitionMode,
    max_skew: Duration,
    sync_every: Duration,
    move_timeout: Duration,
    partition_after: Option<Duration>,
    clock: Option<Arc<dyn Clock>>,
}

impl RegionStore {
    /// Settings for the region `name` (1 to 64 of `A-Z a-z 0-9 . _ -`, the same in every
    /// instance of the region and different in every other region), whose own Redis `local`
    /// reaches, spending allotments of `ledger`.
    pub fn builder(
        name: impl Into<String>,
        local: RedisStore,
        ledger: Ledger,
    ) -> RegionStoreBuilder {
        RegionStoreBuilder {
            name: name.into(),
            local,
            ledger,
            partition: PartitionMode::Refuse,
            max_skew: DEFAULT_MAX_SKEW,
            sync_every: Duration::from_millis(100),
            move_timeout: Duration::from_millis(500),
            partition_after: None,
            clock: None,
        }
    }

    /// The region's name.
    pub fn region(&self) -> &str {
        &self.shared.settings.name
    }

    /// The wrapped store of the region.
    pub fn local(&self) -> &RedisStore {
        &self.shared.region.store
    }
}

impl RegionStoreBuilder {
    /// What the region spends when cut off from the ledger; [`PartitionMode::Refuse`] by
    /// default.
    pub fn partition(mut self, mode: PartitionMode) -> Self {
        self.partition = mode;
        self
    }

    /// The most that any instance's clock, in any region, is off true time (10 ms by default):
    /// nothing is spent within it of a window's edges (see the module's docs). A global
    /// policy's window (its period, a sliding window's sub-interval, a bucket's window) must be
    /// longer than twice it.
    pub fn max_skew(mut self, skew: Duration) -> Self {
        self.max_skew = skew;
        self
    }

    /// How often demand is reported and allotments moved (100 ms by default).
    pub fn sync_every(mut self, every: Duration) -> Self {
        self.sync_every = every;
        self
    }

    /// How long a call of a move may take before it is tried again (500 ms by default).
    pub fn move_timeout(mut self, timeout: Duration) -> Self {
        self.move_timeout = timeout;
        self
    }

    /// How long every call to the ledger must have failed before the region counts itself cut
    /// off and, in emergency mode, grants itself its emergency share (by default twice the
    /// move timeout).
    pub fn partition_after(mut self, after: Duration) -> Self {
        self.partition_after = Some(after);
        self
    }

    /// The clock windows are read from (the system clock by default), for tests.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The store, or what is wrong with the settings.
    pub fn build(self) -> Result<RegionStore, ConfigError> {
        let valid_name = (1..=64).contains(&self.name.len())
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !valid_name {
            return Err(StoreConfigError::InvalidRegionName { name: self.name }.into());
        }
        if let PartitionMode::Emergency { fraction } = self.partition
            && !(fraction > 0.0 && fraction <= 1.0)
        {
            return Err(StoreConfigError::EmergencyFraction { fraction }.into());
        }
        if self.sync_every.is_zero() || self.move_timeout.is_zero() {
            return Err(StoreConfigError::ZeroRegionInterval.into());
        }
        let settings = Settings {
            name: self.name.into(),
            partition: self.partition,
            max_skew_us: micros(self.max_skew),
            sync_every: self.sync_every,
            move_timeout: self.move_timeout,
            partition_after: self.partition_after.unwrap_or(self.move_timeout * 2),
        };
        let store = RegionStore {
            shared: Arc::new(Shared {
                region: Region { store: self.local },
                ledger: self.ledger,
                settings,
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock::new())),
                demand: Demand::default(),
                instance: format!("{:016x}", fastrand::u64(..)).into(),
                moves: AtomicU64::new(0),
                failing_since: AtomicU64::new(0),
                mover: AtomicBool::new(false),
                declared: AtomicU8::new(UNKNOWN),
            }),
        };
        // Built on a runtime, the mover starts now and connects to the ledger, rather than with
        // the first request (whose demand would then wait for connections across regions).
        store.start_mover();
        Ok(store)
    }
}

impl Store for RegionStore {
    fn check(&self, key: &Key, policy: &Policy, cost: u32) -> StoreFuture<Decision> {
        if !policy.is_global() {
            return self.shared.region.store.check(key, policy, cost);
        }
        let shared = &self.shared;
        let key = GlobalKey {
            client: StorageKey::new(key),
            policy: policy.clone(),
            states: self.shared.region.store.state_names(policy),
        };
        let (period, skew) = (key.period_us(), shared.settings.max_skew_us);
        if period <= 2 * skew {
            return StoreFuture::ready(Err(StoreError::error_reply(format!(
                "a global policy's window ({:?}: its period, a sliding window's sub-interval, or \
                 for a bucket the time to refill half its burst) must be longer than twice the \
                 region's max_skew ({:?}): lengthen it or tighten the skew bound",
                Duration::from_micros(period),
                Duration::from_micros(skew)
            ))));
        }
        let now = shared.clock.now_micros();
        let quota = key.quota();
        if u64::from(cost) > quota {
            let verdict = RuleVerdict::new(Outcome::Never, 0, 0, Duration::ZERO, Duration::ZERO);
            return StoreFuture::ready(Ok(Decision::from_verdicts(policy, &[verdict])));
        }
        let window = match spendable(now, period, skew) {
            Spendable::In(window) => window,
            // At a window's edge nothing is spent; while no quota can be granted at all, that
            // is said rather than a wait (a request there would get 429 where the rest get 503).
            Spendable::Guard { .. } if shared.undeclared() => {
                return StoreFuture::ready(Err(StoreError::error_reply(NOT_DECLARED)));
            }
            Spendable::Guard { wait_us } => {
                let wait = Duration::from_micros(wait_us);
                let verdict = RuleVerdict::new(Outcome::Denied, 0, 0, wait, wait);
                return StoreFuture::ready(Ok(Decision::from_verdicts(policy, &[verdict])));
            }
        };
        shared.demand.record(&key, window, cost, now);
        self.start_mover();
        let shared = shared.clone();
        let policy = policy.clone();
        StoreFuture::new(async move {
            let (admitted, counts) = shared.region.spend(&key, window, cost, now).await?;
            // Units held are spent whatever the ledger's state; a refusal while it cannot
            // grant any is no quota's verdict: the layer answers it as the store's failure.
            if !admitted && shared.undeclared() {
                return Err(StoreError::error_reply(NOT_DECLARED));
            }
            let full_after = Duration::from_micros(window.end_us().saturating_sub(now));
            let outcome = if admitted {
                Outcome::Allowed
            } else {
                Outcome::Denied
            };
            let verdict = RuleVerdict::new(
                outcome,
                counts.unspent(),
                counts.spent,
                full_after,
                // When more units come is the ledger's to say; the window's end is the
                // latest a retry may have to wait.
                full_after,
            );
            Ok(Decision::from_verdicts(&policy, &[verdict]))
        })
    }

    /// Resets a policy that is not global in the wrapped store; a global policy's quota is the
    /// world's, which one region cannot hand out afresh: refused.
    fn reset(&self, key: &Key, policy: &Policy) -> StoreFuture<()> {
        if policy.is_global() {
            return StoreFuture::ready(Err(StoreError::error_reply(
                "a global policy's quota is shared by every region: one region cannot reset it",
            )));
        }
        self.shared.region.store.reset(key, policy)
    }

    fn fallback_timeout(&self) -> Option<Duration> {
        self.shared.region.store.fallback_timeout()
    }

    /// "ledger not declared" while the ledger is known to have no declaration.
    fn unready(&self) -> Option<&'static str> {
        self.shared.undeclared().then_some(NOT_DECLARED)
    }
}

impl RegionStore {
    /// Starts this instance's mover on the current runtime: when the store is built on one,
    /// else with its first global decision.
    fn start_mover(&self) {
        if self.shared.mover.load(Ordering::Relaxed)
            || self.shared.mover.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(super::mover::run(weak));
            }
            Err(_) => self.shared.mover.store(false, Ordering::Release),
        }
    }
}

impl fmt::Debug for RegionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionStore")
            .field("region", &self.shared.settings.name)
            .field("local", &self.shared.region.store)
            .field("ledger", &self.shared.ledger)
            .field("partition", &self.shared.settings.partition)
            .finish_non_exhaustive()
    }
}
