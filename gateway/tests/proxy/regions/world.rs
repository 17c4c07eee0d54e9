//! Three regions as processes: each its own `redis-server` and two `ratelimit-gateway proxy`
//! processes reading the file docs/regions.md describes (the region's store with its `region`
//! table naming the ledger, a `global = true` policy), the ledger's Redis reached through the
//! region's [`WanLink`] and declared with `ratelimit-gateway ledger declare FILE`.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::RedisServer;
use testkit::wan::WanLink;

use super::drive::{Sent, now_us};
use super::upstream::{GLOBAL_PATH, KEY_HEADER, PLAIN_PATH, Upstream};
use crate::process::stdout_of;
use crate::support::{BINARY, Proxy, free_addr, proxy_table, readyz_until};

/// Every scenario's windows: one second, aligned to the Unix epoch.
pub(crate) const PERIOD_US: u64 = 1_000_000;
/// The regions' `max_skew`, as docs/regions.md's example sets it. One machine's clock serves
/// every process, but an admission reaches the upstream (whose log is counted) a little after
/// it was decided: decided at least the skew before its window's end (nothing is spent in the
/// last `max_skew`), it is logged in its window.
/// (`"20ms"` in the file.)
const MAX_SKEW_US: u64 = 20_000;
/// Each region's link to the ledger, one way: the distances the issue measured at.
pub(crate) const LATENCIES: [Duration; 3] = [
    Duration::from_millis(40),
    Duration::from_millis(80),
    Duration::from_millis(150),
];

/// Where the regions find the ledger.
pub(crate) enum LedgerAt {
    /// One Redis at this address, which each region reaches through its link.
    Linked(SocketAddr),
    /// The `ledger` table's fields as written (`sentinels` and `master`, or a Cluster's
    /// `nodes`), reached directly: the scenario is about the ledger's servers, not the links
    /// (a Cluster's or Sentinel's clients connect to the addresses the servers announce).
    Direct(String),
}

/// How a world is made.
pub(crate) struct Setup {
    pub(crate) ledger: LedgerAt,
    /// The `region` table's fields beyond its name, ledger and `max_skew`.
    pub(crate) region: &'static str,
    /// The global policy's quota a window, per key: its rule's rate a window (the figures'
    /// utilisation is of it).
    pub(crate) quota: u64,
    /// The global policy's rule.
    pub(crate) rule: GlobalRule,
    /// How many keys the drivers ask, in turn (`customer-0`, ...).
    pub(crate) keys: usize,
}

impl Setup {
    /// The regions finding the ledger at `ledger`, cut off in `refuse` mode, one key asked, a
    /// quota of 100 a window.
    pub(crate) fn new(ledger: LedgerAt) -> Self {
        Self {
            ledger,
            region: r#"partition = "refuse""#,
            quota: 100,
            rule: GlobalRule::FixedWindow,
            keys: 1,
        }
    }

    /// [`new`](Self::new), each region reaching the ledger's Redis at `ledger` through its link.
    pub(crate) fn linked(ledger: SocketAddr) -> Self {
        Self::new(LedgerAt::Linked(ledger))
    }
}

/// The global policy's rule, its windows a second each (docs/regions.md, "Windows").
#[derive(Clone, Copy)]
pub(crate) enum GlobalRule {
    /// A fixed window of [`Setup::quota`] a second.
    FixedWindow,
    /// GCRA of `limit` per `period_s` seconds, `burst` at once: windows of a second when
    /// `period_s` is the fewest whole windows at or above `2 × limit / burst`.
    Gcra {
        limit: u64,
        period_s: u64,
        burst: u64,
    },
    /// A sliding window of `limit` per `sub_intervals` seconds, in sub-intervals of a second.
    SlidingWindow { limit: u64, sub_intervals: u64 },
}

impl GlobalRule {
    /// The rule's fields in the file beyond its name, `quota` a window for a fixed window.
    fn fields(self, quota: u64) -> String {
        match self {
            Self::FixedWindow => {
                format!(r#"algorithm = "fixed_window", limit = {quota}, period = "1s""#)
            }
            Self::Gcra {
                limit,
                period_s,
                burst,
            } => format!(
                r#"algorithm = "gcra", limit = {limit}, period = "{period_s}s", burst = {burst}"#
            ),
            Self::SlidingWindow {
                limit,
                sub_intervals,
            } => format!(
                r#"algorithm = "sliding_window", limit = {limit}, period = "{sub_intervals}s", sub_intervals = {sub_intervals}"#
            ),
        }
    }

    /// The meter's memory (µs), which the declaration fences beyond (docs/regions.md, "Birth
    /// and fence"): a fixed or sliding window's period; a bucket's time to refill its burst
    /// from empty, and two windows.
    fn memory_us(self) -> u64 {
        match self {
            Self::FixedWindow => PERIOD_US,
            Self::Gcra {
                limit,
                period_s,
                burst,
            } => (burst * period_s * PERIOD_US).div_ceil(limit) + 2 * PERIOD_US,
            Self::SlidingWindow { sub_intervals, .. } => sub_intervals * PERIOD_US,
        }
    }
}

/// One region: its Redis, its link to the ledger, its two proxies and their admin addresses.
pub(crate) struct Site {
    /// Behind a lock so that a scenario may kill and restart it while the drivers run.
    pub(crate) redis: Mutex<RedisServer>,
    pub(crate) link: Option<WanLink>,
    pub(crate) proxies: Vec<(Proxy, SocketAddr)>,
}

/// The regions, the upstream and what was sent.
pub(crate) struct World {
    pub(crate) sites: Vec<Site>,
    pub(crate) upstream: Upstream,
    /// Every request the drivers sent, as the clients saw it.
    pub(crate) sent: Arc<Mutex<Vec<Sent>>>,
    pub(crate) quota: u64,
    pub(crate) keys: usize,
    /// The start of the first window the ledger grants (µs since the epoch): time 0.
    pub(crate) t0_us: u64,
    pub(crate) client: reqwest::Client,
    /// This world's turn: one world runs at a time (nine processes and their drivers each, on
    /// a machine of two cores that runs the binary's other tests beside them).
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// Whose turn it is to run a world.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The file of a proxy of region `index`, as docs/regions.md's "Configuration" writes it, its
/// `ledger` table holding `ledger`.
fn config(
    setup: &Setup,
    index: usize,
    redis: &str,
    ledger: &str,
    upstream: SocketAddr,
    admin: SocketAddr,
) -> String {
    let proxy = proxy_table(upstream, &format!("admin = \"{admin}\""));
    let (rule, region) = (setup.rule.fields(setup.quota), setup.region);
    format!(
        r#"{proxy}
        [stores.region]
        type = "redis"
        url = "{redis}"
        region = {{ name = "region-{index}", ledger = {{ {ledger} }}, {region}, max_skew = "20ms" }}

        [policies.api]
        global = true
        rules = [{{ name = "api", {rule} }}]

        # A policy that is not global, decided by the region's Redis alone: the latency to
        # compare with.
        [policies.plain]
        rules = [{{ name = "plain", algorithm = "fixed_window", limit = 1000000, period = "1s" }}]

        [routes.api]
        paths = ["{GLOBAL_PATH}"]
        policy = "api"
        key = {{ header = "{KEY_HEADER}" }}

        [routes.plain]
        paths = ["{PLAIN_PATH}"]
        policy = "plain"
        key = {{ header = "{KEY_HEADER}" }}
        "#
    )
}

impl Site {
    fn start(setup: &Setup, index: usize, upstream: SocketAddr) -> Self {
        let redis = RedisServer::start();
        let (link, ledger) = match &setup.ledger {
            LedgerAt::Linked(ledger) => {
                let link = WanLink::start(*ledger, LATENCIES[index]);
                let url = format!("url = \"{}\"", link.url());
                (Some(link), url)
            }
            LedgerAt::Direct(table) => (None, table.clone()),
        };
        let proxies = (0..2)
            .map(|_| {
                let admin = free_addr();
                let text = config(setup, index, &redis.url(), &ledger, upstream, admin);
                (Proxy::start(&text), admin)
            })
            .collect();
        Self {
            redis: Mutex::new(redis),
            link,
            proxies,
        }
    }
}

impl World {
    /// Starts the regions, declares the ledger from the command line with the first region's
    /// file, waits until every proxy is ready, and returns half a window before time 0 (the
    /// first window the declaration does not fence), when the drivers should start: the
    /// regions take each window's units ahead.
    pub(crate) async fn start(setup: Setup) -> Self {
        let turn = TURN.lock().await;
        let upstream = Upstream::start();
        let sites: Vec<Site> = tokio::task::block_in_place(|| {
            (0..LATENCIES.len())
                .map(|index| Site::start(&setup, index, upstream.addr))
                .collect()
        });
        let mut declare = Command::new(BINARY);
        declare.args([
            "ledger",
            "declare",
            sites[0].proxies[0].0.config.to_str().unwrap(),
        ]);
        let declared = stdout_of(declare).await;
        assert!(declared.contains(" declared: epoch "), "{declared}");
        // The declaration fences every window that starts within the meter's memory and twice
        // the skew of it; it happened before now.
        let fence = now_us() + setup.rule.memory_us() + 2 * MAX_SKEW_US;
        let t0_us = (fence / PERIOD_US + 1) * PERIOD_US;
        for site in &sites {
            for (_, admin) in &site.proxies {
                readyz_until(*admin, 200).await;
            }
        }
        let world = Self {
            sites,
            upstream,
            sent: Arc::default(),
            quota: setup.quota,
            keys: setup.keys,
            t0_us,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            _turn: turn,
        };
        world.sleep_until(-0.5).await;
        world
    }

    /// Seconds since time 0 (negative before).
    pub(crate) fn now_s(&self) -> f64 {
        self.seconds(now_us())
    }

    /// `at_us` (µs since the epoch) in seconds since time 0.
    pub(crate) fn seconds(&self, at_us: u64) -> f64 {
        (at_us as f64 - self.t0_us as f64) / 1e6
    }

    pub(crate) async fn sleep_until(&self, at_s: f64) {
        let wait = at_s - self.now_s();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }

    /// Kills region `index`'s Redis (SIGKILL), on a blocking thread.
    pub(crate) fn kill_redis(&self, index: usize) {
        tokio::task::block_in_place(|| self.sites[index].redis.lock().unwrap().kill());
    }

    /// Starts region `index`'s Redis again, empty, on its port.
    pub(crate) fn restart_redis(&self, index: usize) {
        tokio::task::block_in_place(|| self.sites[index].redis.lock().unwrap().restart());
    }

    /// Region `index`'s link to the ledger.
    pub(crate) fn link(&self, index: usize) -> &WanLink {
        self.sites[index].link.as_ref().expect("a linked ledger")
    }
}
