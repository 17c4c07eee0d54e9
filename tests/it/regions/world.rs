//! Three regions on one machine: each its own `redis-server` and two instances (region stores
//! sharing it), a ledger's Redis reached from each region through a [`WanLink`] that adds
//! latency and cuts on command, drivers that ask each region at a rate a scenario sets, and the
//! log of every admission with its time.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::wan::WanLink;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};
use tower_redis_ratelimit::clock::{Clock, SystemClock};
use tower_redis_ratelimit::key::GlobalKey;
use tower_redis_ratelimit::store::region::{Ledger, PartitionMode, RegionStore};
use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, RedisStore, Rule};

use crate::support::RedisServer;

/// A scenario's quota unless its setup says otherwise: `QUOTA` units per window, worldwide.
pub(crate) const QUOTA: u32 = 100;
/// A scenario's window unless its setup says otherwise.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);
/// The clocks' skew bound: every instance reads one machine's clock.
pub(crate) const MAX_SKEW: Duration = Duration::from_millis(2);

/// One region: its Redis, its link to the ledger, its instances.
pub(crate) struct Site {
    /// Behind a lock so that a scenario may restart it while the drivers run.
    pub(crate) redis: Mutex<RedisServer>,
    pub(crate) link: WanLink,
    /// Each instance (a region store) as a request meets it: a rate-limit layer over it.
    fronts: Vec<Front>,
}

/// A rate-limit layer with the default failure mode (open) over an instance's store, in front
/// of a service that answers 200: the status of each request.
type Front = BoxCloneSyncService<http::Request<()>, u16, Infallible>;

fn front(store: &RegionStore, policy: &Policy) -> Front {
    let layer = RateLimitLayer::builder()
        .key(GlobalKey::new("customer-7"))
        .store(store.clone())
        .policy(policy)
        // The scenarios are about regions, not a loaded machine's deadline.
        .deadline(Duration::from_secs(1))
        .build()
        .expect("a layer");
    let ok = tower::service_fn(|_: http::Request<()>| async {
        Ok::<_, Infallible>(http::Response::new(String::new()))
    });
    BoxCloneSyncService::new(
        layer
            .layer(ok)
            .map_response(|response| response.status().as_u16()),
    )
}

/// One request's outcome: when (µs since the epoch), in which region, admitted or not.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Admission {
    pub(crate) at_us: u64,
    pub(crate) region: usize,
    pub(crate) allowed: bool,
}

/// The regions, the ledger's link targets and the admission log.
pub(crate) struct World {
    pub(crate) sites: Vec<Site>,
    pub(crate) log: Arc<Mutex<Vec<Admission>>>,
    pub(crate) clock: SystemClock,
    /// The start of the first window the ledger grants (µs): a scenario's time 0.
    pub(crate) t0_us: u64,
    /// The ledger's windows' length (µs).
    pub(crate) period_us: u64,
    /// This world's turn: one world runs at a time (three Redis servers, six region stores
    /// ticking every 50 ms, their links and drivers, on a machine of two cores that runs the
    /// suite's other tests beside them: two worlds at once delay each other's ticks).
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// Whose turn it is to run a world.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How a world is made.
pub(crate) struct Setup {
    /// Each region's latency to the ledger, one way.
    pub(crate) latencies: [Duration; 3],
    pub(crate) partition: PartitionMode,
    /// The global policy every instance limits (`QUOTA` per `PERIOD`, a fixed window, unless a
    /// scenario says otherwise), and how long after the ledger's declaration it fences the
    /// policy's windows (one period for a fixed window; `docs/regions.md`).
    pub(crate) policy: Policy,
    pub(crate) fence: Duration,
    /// How long the ledger's windows of the policy are (`PERIOD` unless a scenario says
    /// otherwise): time 0 is the start of one.
    pub(crate) window: Duration,
    /// How often the instances report demand and move allotments.
    pub(crate) sync_every: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            latencies: [
                Duration::from_millis(30),
                Duration::from_millis(100),
                Duration::from_millis(150),
            ],
            partition: PartitionMode::Refuse,
            policy: Policy::global(Rule::fixed_window("api", Quota::new(QUOTA, PERIOD)))
                .expect("a global policy"),
            fence: PERIOD,
            window: PERIOD,
            sync_every: Duration::from_millis(50),
        }
    }
}

impl World {
    /// Three regions spending a ledger at `ledger` (a store on the ledger's Redis, reached
    /// directly, to declare it) whose address each region reaches through its link.
    pub(crate) async fn start(setup: Setup, ledger_addr: std::net::SocketAddr) -> Self {
        let ledger_direct = Ledger::new(
            RedisStore::open(&format!("redis://{ledger_addr}")).expect("the ledger's store"),
        );
        Self::start_with(setup, ledger_direct, ledger_addr, |link| {
            Ledger::new(RedisStore::open(&link.url()).expect("the ledger's store"))
        })
        .await
    }

    /// As [`start`](Self::start), the links forwarding to `target`, each region's ledger made
    /// by `ledger_for` from its link, `declare` declaring it.
    pub(crate) async fn start_with(
        setup: Setup,
        declare: Ledger,
        target: std::net::SocketAddr,
        ledger_for: impl Fn(&WanLink) -> Ledger,
    ) -> Self {
        let turn = TURN.lock().await;
        let clock = SystemClock::new();
        let policy = &setup.policy;
        let period_us = u64::try_from(setup.window.as_micros()).unwrap();
        let epoch = declare
            .declare_new(MAX_SKEW)
            .await
            .expect("the ledger declared");
        let sites = setup
            .latencies
            .iter()
            .enumerate()
            .map(|(index, latency)| {
                let redis = RedisServer::start();
                let link = WanLink::start(target, *latency);
                let ledger = ledger_for(&link);
                let instances: Vec<RegionStore> = (0..2)
                    .map(|_| {
                        RegionStore::builder(
                            format!("region-{index}"),
                            RedisStore::open(&redis.url()).expect("the region's store"),
                            ledger.clone(),
                        )
                        .partition(setup.partition)
                        .max_skew(MAX_SKEW)
                        .sync_every(setup.sync_every)
                        .move_timeout(Duration::from_millis(400))
                        .partition_after(Duration::from_millis(500))
                        .build()
                        .expect("a region store")
                    })
                    .collect();
                Site {
                    redis: Mutex::new(redis),
                    link,
                    fronts: instances.iter().map(|store| front(store, policy)).collect(),
                }
            })
            .collect();
        // The ledger grants no window starting within its fence and twice the skew of its
        // declaration: the first it grants opens the scenario.
        let fence = epoch + u64::try_from(setup.fence.as_micros()).unwrap() + 2 * skew_us();
        let t0_us = (fence / period_us + 1) * period_us;
        let world = Self {
            sites,
            log: Arc::default(),
            clock,
            t0_us,
            period_us,
            _turn: turn,
        };
        // Demand is asked from half a second before: the regions take the first window's
        // allotments ahead, as they do every window's.
        world.sleep_until(-0.5).await;
        world
    }

    /// Seconds since time 0 (negative before).
    pub(crate) fn now_s(&self) -> f64 {
        (self.clock.now_micros() as f64 - self.t0_us as f64) / 1e6
    }

    pub(crate) async fn sleep_until(&self, at_s: f64) {
        let wait = at_s - self.now_s();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }

    /// Drives the regions until `until_s`: region `r` is asked `rate(r, t)` requests per second
    /// at scenario time `t`, alternating between its instances' layers; every outcome is
    /// logged (admitted: answered 200).
    pub(crate) async fn drive(&self, until_s: f64, rate: impl Fn(usize, f64) -> f64 + Sync) {
        let tick = Duration::from_millis(5);
        let mut owed = [0.0_f64; 3];
        let mut turn = 0_usize;
        let mut last = self.now_s();
        while self.now_s() < until_s {
            tokio::time::sleep(tick).await;
            let now = self.now_s();
            let elapsed = now - last;
            last = now;
            let mut asks = Vec::new();
            for (region, owed) in owed.iter_mut().enumerate() {
                *owed += rate(region, now) * elapsed;
                while *owed >= 1.0 {
                    *owed -= 1.0;
                    turn += 1;
                    asks.push((region, turn % 2));
                }
            }
            let checks = asks.into_iter().map(|(region, instance)| {
                let front = self.sites[region].fronts[instance].clone();
                async move {
                    let at_us = self.clock.now_micros();
                    // Whatever the layer answers: a store's error (the region's Redis
                    // restarting) is the layer's to turn into a refusal.
                    let status = front.oneshot(http::Request::new(())).await;
                    let allowed = status == Ok(200);
                    Admission {
                        at_us,
                        region,
                        allowed,
                    }
                }
            });
            let outcomes = futures_util::future::join_all(checks).await;
            self.log.lock().unwrap().extend(outcomes);
        }
    }

    /// Admissions per window (by index from time 0) and region: `[window][region]`.
    pub(crate) fn admitted(&self) -> Vec<[u64; 3]> {
        let log = self.log.lock().unwrap();
        let mut windows: Vec<[u64; 3]> = Vec::new();
        for admission in log.iter().filter(|admission| admission.allowed) {
            let Some(window) = admission.at_us.checked_sub(self.t0_us) else {
                continue;
            };
            let window = usize::try_from(window / self.period_us).unwrap();
            if windows.len() <= window {
                windows.resize(window + 1, [0; 3]);
            }
            windows[window][admission.region] += 1;
        }
        windows
    }

    /// Requests asked and admitted per region in `[from_s, to_s)` (scenario time).
    pub(crate) fn counted(&self, from_s: f64, to_s: f64) -> [(u64, u64); 3] {
        let mut counted = [(0, 0); 3];
        for admission in self.log.lock().unwrap().iter() {
            let at_s = (admission.at_us as f64 - self.t0_us as f64) / 1e6;
            if (from_s..to_s).contains(&at_s) {
                let (asked, admitted) = &mut counted[admission.region];
                *asked += 1;
                *admitted += u64::from(admission.allowed);
            }
        }
        counted
    }

    /// Checks from the log that no window admitted more than `bound` worldwide (counting every
    /// admission, the half window before time 0 included), and returns the admissions per window.
    pub(crate) fn assert_at_most(&self, bound: u64) -> Vec<[u64; 3]> {
        let log = self.log.lock().unwrap();
        let mut per_window = std::collections::BTreeMap::<u64, u64>::new();
        for admission in log.iter().filter(|admission| admission.allowed) {
            *per_window
                .entry(admission.at_us / self.period_us)
                .or_default() += 1;
        }
        drop(log);
        let windows = self.admitted();
        // Shown when the test fails further on.
        eprintln!("admitted per window and region: {windows:?}");
        for (window, count) in per_window {
            assert!(
                count <= bound,
                "window {window} admitted {count} worldwide, above {bound}: {windows:?}"
            );
        }
        windows
    }
}

fn skew_us() -> u64 {
    u64::try_from(MAX_SKEW.as_micros()).unwrap()
}
