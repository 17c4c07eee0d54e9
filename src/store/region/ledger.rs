//! [`Ledger`]: which region holds how much of each global key's window quota, in one Redis
//! (standalone, a primary that Sentinel follows, or a Redis Cluster), moved only by moves with
//! ids (`lua/ledger.lua`).

use std::fmt;
use std::time::Duration;

use crate::store::redis::wrapped::{Call, Entry, slot};
use crate::store::{RedisStore, StoreError};

use super::global_key::GlobalKey;
use super::meter::Meter;
use super::window::Window;

/// The ledger of global policies: for each key and window, the units free and the units each
/// region holds. Regions take allotments from it and credit back what they do not need; no
/// request waits on it.
///
/// It lives in one Redis, reached through a [`RedisStore`] (so a Sentinel-managed primary is
/// followed across failovers), or in a Redis Cluster ([`RedisStore::cluster`]): a key's window,
/// the window before and its moves share the client key's hash tag, and the declaration is
/// kept in every hash slot, so that each take is one call in one slot. A take counts only once `replicas` replicas hold it (`WAIT`):
/// a failover to one of them cannot forget it and hand the units out again. A ledger whose Redis
/// restarted empty, or was never declared, grants nothing until it is declared with
/// [`declare`](Self::declare) (`ratelimit-gateway ledger declare FILE`), which fences the
/// windows an earlier life may have granted. Run the ledger's Redis without persistence (a restart then comes back empty and
/// fenced) or with `appendfsync always`: a restart from a snapshot older than its last takes
/// would grant them again.
///
/// ```no_run
/// use std::time::Duration;
/// use tower_redis_ratelimit::RedisStore;
/// use tower_redis_ratelimit::store::region::Ledger;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let ledger = Ledger::new(RedisStore::open("redis://ledger.internal:6379")?)
///     .replicas(1, Duration::from_millis(200));
/// // Once, when the ledger's Redis is new (or came back empty); again, it changes nothing:
/// ledger.declare(Duration::from_millis(50)).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Ledger {
    pub(super) store: RedisStore,
    pub(super) replicas: u32,
    pub(super) wait: Duration,
}

/// What the ledger answered a take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Taken {
    /// Units granted.
    pub(crate) units: u64,
    /// Whether the window is fenced (an earlier life of the ledger may have granted it).
    pub(crate) fenced: bool,
    /// Whether enough replicas acknowledged the take: only then may it be applied.
    pub(crate) counted: bool,
    /// The region's share of the window: the quota split by the demands the ledger knows
    /// (0 in the answer to a retried or fenced take).
    pub(crate) share: u64,
    /// The units the region holds of the window on the ledger, this grant included.
    pub(crate) held: u64,
    /// The units the other regions wait for: what their shares lack beyond the free units.
    pub(crate) waiting: u64,
}

impl Taken {
    /// The units the region should give back: what it holds beyond its share, up to what the
    /// others wait for. Nothing while the others' shares are covered: then a region may hold
    /// more than its share.
    pub(crate) fn to_give_back(self) -> u64 {
        self.held.saturating_sub(self.share).min(self.waiting)
    }
}

impl Ledger {
    /// The ledger in the Redis `store` reaches, granting without waiting for replicas.
    pub fn new(store: RedisStore) -> Self {
        Self {
            store,
            replicas: 0,
            wait: Duration::ZERO,
        }
    }

    /// A take counts once `replicas` replicas acknowledge it within `timeout` (`WAIT`); one
    /// that is not acknowledged is asked again (the same move: granted once) until it is.
    /// Set it to the replicas a failover may promote.
    pub fn replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = replicas;
        self.wait = timeout;
        self
    }

    /// The Redis store the ledger lives in.
    pub fn store(&self) -> &RedisStore {
        &self.store
    }

    /// Sends a PING to the ledger's Redis, connecting first if needed.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    /// Where the declaration a take of `key` reads is: the ledger's one birth, or on a cluster
    /// the birth of the key's slot.
    fn birth_key_of(&self, key: &GlobalKey) -> String {
        let slot = self
            .store
            .is_cluster()
            .then(|| slot::of(key.client.as_str()));
        self.birth_key(slot)
    }

    /// The birth `<prefix>:ledger:birth` (`None`: one server), or on a cluster the birth of
    /// `slot`, `<prefix>:ledger:birth:{<tag>}` with a tag that falls in that slot.
    pub(super) fn birth_key(&self, slot: Option<u16>) -> String {
        match slot {
            None => format!("{}:ledger:birth", self.store.prefix()),
            Some(slot) => format!(
                "{}:ledger:birth:{{{}}}",
                self.store.prefix(),
                slot::tag(slot)
            ),
        }
    }

    /// The slots whose births the declaration writes: the one birth (`None`) on one server,
    /// every slot's on a cluster.
    pub(super) fn birth_slots(&self) -> Vec<Option<u16>> {
        if self.store.is_cluster() {
            (0..slot::SLOTS).map(Some).collect()
        } else {
            vec![None]
        }
    }

    /// A call of `op` on `window` of `key`: the birth, the window's hash, the one before, its
    /// moves, then what the rule's meter reads (a sliding window's windows, a bucket's meter);
    /// the meter's name and settings come after `op`'s own arguments ([`meter_args`]).
    fn call(&self, key: &GlobalKey, window: Window, op: &str, now_us: u64) -> Call {
        let prefix = self.store.prefix();
        let hash = key.ledger_key(prefix, window);
        let previous = key.ledger_key(
            prefix,
            Window {
                index: window.index.saturating_sub(1),
                ..window
            },
        );
        let moves = format!("{hash}:moves");
        let meter = key.meter();
        let windows = meter.windows_read(window.index);
        let bucket = matches!(meter, Meter::Bucket { .. });
        let mut call = Call::new(
            Entry::Ledger,
            0,
            4 + windows.clone().count() + usize::from(bucket),
        );
        call.key(self.birth_key_of(key))
            .key(hash)
            .key(previous)
            .key(moves);
        for index in windows {
            call.key(key.ledger_key(prefix, Window { index, ..window }));
        }
        if bucket {
            call.key(key.meter_key(prefix));
        }
        call.arg(op).arg(key.ledger_ttl_ms(window, now_us));
        call
    }

    /// Takes up to `want` units of `window` for `region` by move `id`, reporting the region's
    /// `demand` (units per window) by which the ledger shares the quota out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn take(
        &self,
        key: &GlobalKey,
        window: Window,
        region: &str,
        id: &str,
        want: u64,
        demand: u64,
        now_us: u64,
    ) -> Result<Taken, StoreError> {
        let mut call = self.call(key, window, "take", now_us);
        call.arg(region)
            .arg(id)
            .arg(want)
            .arg(demand)
            .arg(key.limit())
            .arg(window.start_us())
            // The fence: how long after a declaration an earlier life's grants may bear.
            .arg(key.meter().memory_us(key.limit(), window.period_us));
        meter_args(&mut call, key, window);
        type Reply = (u64, u64, i64, u64, u64, u64);
        let ((units, _epoch, fenced, share, held, waiting), acknowledged): (Reply, u32) = self
            .store
            .run_and_wait(&call, self.replicas, self.wait)
            .await?;
        Ok(Taken {
            units,
            fenced: fenced == 1,
            counted: acknowledged >= self.replicas,
            share,
            held,
            waiting,
        })
    }

    /// Gives `units` that `region` surrendered back to `window`'s free units, by move `id`.
    pub(crate) async fn credit(
        &self,
        key: &GlobalKey,
        window: Window,
        region: &str,
        id: &str,
        units: u64,
        now_us: u64,
    ) -> Result<(), StoreError> {
        let mut call = self.call(key, window, "credit", now_us);
        call.arg(region).arg(id).arg(units);
        meter_args(&mut call, key, window);
        let _free: u64 = self.store.run(&call).await?;
        Ok(())
    }
}

/// The meter's arguments, after an operation's own: its name, windows per period, burst (0 but
/// for a bucket), the rule's limit and the window's index.
fn meter_args(call: &mut Call, key: &GlobalKey, window: Window) {
    let meter = key.meter();
    let burst = match meter {
        Meter::Bucket { burst, .. } => burst,
        _ => 0,
    };
    call.arg(meter.name())
        .arg(meter.windows())
        .arg(burst)
        .arg(key.limit())
        .arg(window.index);
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("store", &self.store)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use testkit::RedisServer;

    use super::*;
    use crate::clock::Clock;
    use crate::key::Key;
    use crate::policy::{Policy, Rule};
    use crate::quota::Quota;
    use crate::store::redis::wrapped::{StorageKey, names};

    fn key() -> GlobalKey {
        let policy = Policy::global(Rule::fixed_window("api", Quota::per_second(100))).unwrap();
        GlobalKey {
            client: StorageKey::new(&Key::from("customer")),
            states: names(&policy),
            policy,
        }
    }

    /// A window well past any fence of a ledger declared now.
    fn later(now_us: u64) -> Window {
        Window::at(now_us, 1_000_000).next().next().next().next()
    }

    fn now_us() -> u64 {
        crate::clock::SystemClock::new().now_micros()
    }

    #[tokio::test]
    async fn a_ledger_never_declared_grants_nothing() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        let now = now_us();
        let error = ledger
            .take(&key(), later(now), "eu", "m1", 10, 10, now)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("ledger not declared"), "{error}");
    }

    /// An error reply of a take (here: a ledger not declared) is read in the round trip that
    /// sent it, beside WAIT's: the call is not sent again. Two round trips at 150 ms one way
    /// would pass a move's 500 ms timeout.
    #[tokio::test]
    async fn an_error_reply_costs_one_round_trip() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        let now = now_us();
        // The first call loads the library (a round trip of its own, once per server).
        ledger.ping().await.unwrap();
        let _ = ledger
            .take(&key(), later(now), "eu", "m1", 10, 10, now)
            .await;
        redis.cli(&["CONFIG", "RESETSTAT"]);
        let error = ledger
            .take(&key(), later(now), "eu", "m2", 10, 10, now)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("ledger not declared"), "{error}");
        let calls = redis.command_calls();
        assert_eq!(
            (redis.script_calls(), calls.get("wait").copied()),
            (1, Some(1)),
            "{calls:?}"
        );
    }

    #[tokio::test]
    async fn a_retried_or_late_move_applies_once() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        ledger.declare_new(Duration::from_millis(5)).await.unwrap();
        let (key, now) = (key(), now_us());
        let window = later(now);
        let first = ledger
            .take(&key, window, "eu", "m1", 70, 70, now)
            .await
            .unwrap();
        assert_eq!(
            (first.units, first.fenced, first.counted),
            (70, false, true)
        );
        // The same take again (a retry after a lost reply): the same answer, nothing more taken.
        let again = ledger
            .take(&key, window, "eu", "m1", 70, 70, now)
            .await
            .unwrap();
        assert_eq!(again.units, 70);
        // Another region asks all: 30 are left.
        let other = ledger
            .take(&key, window, "us", "m2", 100, 100, now)
            .await
            .unwrap();
        assert_eq!(other.units, 30);
        // A credit retried, or arriving twice, frees its units once.
        ledger
            .credit(&key, window, "eu", "m3", 20, now)
            .await
            .unwrap();
        ledger
            .credit(&key, window, "eu", "m3", 20, now)
            .await
            .unwrap();
        let after = ledger
            .take(&key, window, "us", "m4", 100, 100, now)
            .await
            .unwrap();
        assert_eq!(after.units, 20);
        // A credit of more than the region holds frees only what it holds.
        ledger
            .credit(&key, window, "ap", "m5", 50, now)
            .await
            .unwrap();
        let none = ledger
            .take(&key, window, "us", "m6", 100, 100, now)
            .await
            .unwrap();
        assert_eq!(none.units, 0);
    }

    /// A take that the replicas a ledger waits for did not acknowledge does not count; asked
    /// again, it is the same take, never a second one.
    #[tokio::test]
    async fn a_take_counts_only_once_the_replicas_hold_it() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap())
            .replicas(1, Duration::from_millis(20));
        ledger.declare_new(Duration::from_millis(5)).await.unwrap();
        let (key, now) = (key(), now_us());
        let window = later(now);
        for _ in 0..2 {
            let taken = ledger
                .take(&key, window, "eu", "m1", 60, 60, now)
                .await
                .unwrap();
            assert_eq!((taken.units, taken.counted), (60, false));
        }
        let rest = ledger
            .take(&key, window, "us", "m2", 100, 100, now)
            .await
            .unwrap();
        assert_eq!(rest.units, 40);
    }

    #[tokio::test]
    async fn the_quota_is_shared_by_demand_when_it_does_not_cover_every_region() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        ledger.declare_new(Duration::from_millis(5)).await.unwrap();
        let (key, now) = (key(), now_us());
        let window = later(now);
        // The previous window's demands stand for regions not heard from yet: "us" asked 300
        // units a window there, so "eu", asking 100, gets a quarter of the quota first.
        let previous = Window {
            index: window.index - 1,
            ..window
        };
        ledger
            .take(&key, previous, "us", "p1", 100, 300, now)
            .await
            .unwrap();
        let eu = ledger
            .take(&key, window, "eu", "m1", 100, 100, now)
            .await
            .unwrap();
        assert_eq!(eu.units, 25);
        let us = ledger
            .take(&key, window, "us", "m2", 100, 300, now)
            .await
            .unwrap();
        assert_eq!(us.units, 75);
    }

    /// A take answers the region's share and what the others wait for, so that a region
    /// holding more than its share gives back what the others lack, even when its own demand
    /// still needs it.
    #[tokio::test]
    async fn a_take_says_what_a_region_holds_beyond_the_share_others_wait_for() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        ledger.declare_new(Duration::from_millis(5)).await.unwrap();
        let (key, now) = (key(), now_us());
        let window = later(now);
        // Alone, "eu" asks twice the quota: its share is the whole quota, and it takes it.
        let eu = ledger
            .take(&key, window, "eu", "m1", 100, 200, now)
            .await
            .unwrap();
        assert_eq!(
            (eu.units, eu.share, eu.held, eu.waiting),
            (100, 100, 100, 0)
        );
        assert_eq!(eu.to_give_back(), 0);
        // "us" asks as much: a third of the quota is its share, nothing is free.
        let us = ledger
            .take(&key, window, "us", "m2", 50, 100, now)
            .await
            .unwrap();
        assert_eq!((us.units, us.share, us.held, us.waiting), (0, 33, 0, 0));
        // "eu" reports again (a take of nothing): it holds 100 of a share of 66, and "us"
        // waits for its 33.
        let eu = ledger
            .take(&key, window, "eu", "m3", 0, 200, now)
            .await
            .unwrap();
        assert_eq!((eu.units, eu.share, eu.held, eu.waiting), (0, 66, 100, 33));
        assert_eq!(eu.to_give_back(), 33);
        // Given back (the region surrendered them first), "us" takes its share.
        ledger
            .credit(&key, window, "eu", "m4", 33, now)
            .await
            .unwrap();
        let us = ledger
            .take(&key, window, "us", "m5", 50, 100, now)
            .await
            .unwrap();
        assert_eq!((us.units, us.held, us.waiting), (33, 33, 0));
        let eu = ledger
            .take(&key, window, "eu", "m6", 0, 200, now)
            .await
            .unwrap();
        assert_eq!(eu.to_give_back(), 0);
    }

    #[tokio::test]
    async fn a_ledger_declared_new_grants_no_window_an_earlier_life_may_have_granted() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        let epoch = ledger.declare_new(Duration::from_millis(5)).await.unwrap();
        let key = key();
        let fenced = [
            Window::at(epoch, 1_000_000),
            Window::at(epoch, 1_000_000).next(),
        ];
        for window in fenced {
            let taken = ledger
                .take(&key, window, "eu", "m", 10, 10, epoch)
                .await
                .unwrap();
            assert_eq!((taken.units, taken.fenced), (0, true), "{window:?}");
        }
        let open = Window::at(epoch + 1_010_001, 1_000_000).next();
        let taken = ledger
            .take(&key, open, "eu", "m", 10, 10, epoch)
            .await
            .unwrap();
        assert_eq!((taken.units, taken.fenced), (10, false));
    }
}
