//! Real Envoys (1.40, the `rate_limit_quota` filter) in front of an upstream that counts what
//! it is sent, asking `serve` for their quota assignments, each configured by the files
//! gateway/docs/envoy.md shows ("The quota service"), read from the page with their addresses
//! and ports changed: three Envoys and two `serve` instances sharing one Redis, demand at twice
//! the quota moving between the Envoys; a `serve` killed; a limit changed by a reload. What
//! the upstream admits per second stays within the quota and the bound of the page, and
//! reaches 90 % of the quota once the shares have settled.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::any;
use testkit::peer::{Peer, documented_block};
use testkit::{RedisServer, TempDir};

use crate::front::{PAGE, run_envoy, socket_address, start_serve, with};
use crate::process::GatewayProcess;

/// The page's quota: 20 a second per tenant, burst 5.
const LIMIT: usize = 20;
const BURST: usize = 5;
/// How many Envoys these tests run.
const ENVOYS: usize = 3;
/// The page's bound on what the fleet admits in a second beyond the limit, with at most one
/// new token bucket per Envoy in a second (a share changes at most once per time to live,
/// 2 s): every Envoy's burst at the start, its rounding (a token each), and a full burst of
/// every new bucket.
const BOUND: usize = BURST + ENVOYS + ENVOYS * BURST;

/// The upstream: counts when each request came.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Instant>>>,
}

impl Upstream {
    async fn start() -> Upstream {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let counted = Arc::clone(&seen);
        let app = Router::new().fallback(any(move || {
            let counted = Arc::clone(&counted);
            async move {
                counted.lock().unwrap().push(Instant::now());
                "served"
            }
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Upstream { addr, seen }
    }

    /// How many requests came in each second from `from`, for `seconds` seconds.
    fn per_second(&self, from: Instant, seconds: usize) -> Vec<usize> {
        let mut counts = vec![0; seconds];
        for at in self.seen.lock().unwrap().iter() {
            if let Some(elapsed) = at.checked_duration_since(from) {
                let second = usize::try_from(elapsed.as_secs()).unwrap();
                if second < seconds {
                    counts[second] += 1;
                }
            }
        }
        counts
    }
}

/// The page's rules, in `dir/ratelimit/config`, and its `serve.toml` asking `redis`.
fn write_files(dir: &Path, redis: &RedisServer) -> std::path::PathBuf {
    let rules = dir.join("ratelimit/config");
    std::fs::create_dir_all(&rules).unwrap();
    let tenants = documented_block(PAGE, "yaml", "# ratelimit/config/tenants.yaml", &[]).unwrap();
    std::fs::write(rules.join("tenants.yaml"), tenants).unwrap();
    let serve = documented_block(
        PAGE,
        "toml",
        "[serve.envoy]",
        &[
            (
                "url = \"redis://10.0.0.5:6379\"",
                format!("url = {:?}", redis.url()),
            ),
            (
                "listen = \"0.0.0.0:8081\"",
                "listen = \"127.0.0.1:0\"".to_owned(),
            ),
            ("admin = \"127.0.0.1:9090\"", String::new()),
        ],
    )
    .unwrap();
    let config = dir.join("serve.toml");
    std::fs::write(&config, serve).unwrap();
    config
}

/// A `serve` instance of the page's files, and its address.
fn start_instance(config: &Path) -> (GatewayProcess, SocketAddr) {
    let (process, line, addr) = start_serve(config, None);
    let addr = addr.strip_prefix("http://").unwrap_or(&addr);
    (process, addr.parse().unwrap_or_else(|_| panic!("{line}")))
}

/// An Envoy of the page's quota file in front of `upstream`, asking `serve`; its listener.
fn start_envoy(upstream: SocketAddr, serve: SocketAddr) -> (SocketAddr, Peer) {
    let documented = documented_block(PAGE, "yaml", "name: quota_ingress", &[]).unwrap();
    run_envoy(|listen| {
        with(
            &documented,
            &[
                (
                    "{ address: 0.0.0.0, port_value: 8080 }",
                    socket_address(listen),
                ),
                (
                    "{ address: 127.0.0.1, port_value: 3000 }",
                    socket_address(upstream),
                ),
                (
                    "{ address: 127.0.0.1, port_value: 8081 }",
                    socket_address(serve),
                ),
            ],
        )
    })
}

/// Sends `rate` requests a second of tenant `acme`, evenly, to the Envoy at `envoy`, for
/// `seconds`; each request on its own task, so that a slow answer does not slow the rate.
async fn drive(client: &reqwest::Client, envoy: SocketAddr, rate: u32, seconds: u64) {
    if rate == 0 {
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        return;
    }
    let every = Duration::from_secs(1) / rate;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        tick.tick().await;
        let request = client
            .get(format!("http://{envoy}/"))
            .header("x-tenant", "acme")
            .send();
        tokio::spawn(async move {
            let _ = request.await;
        });
    }
}

/// One phase: each Envoy's rate (requests a second) for `seconds`.
async fn phase(client: &reqwest::Client, envoys: &[SocketAddr], rates: &[u32], seconds: u64) {
    let driven = envoys
        .iter()
        .zip(rates)
        .map(|(envoy, rate)| drive(client, *envoy, *rate, seconds));
    futures_util::future::join_all(driven).await;
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Twice the quota asked of one Envoy of the first instance for 10 s, then the quota asked
/// of each of the two others, one per instance, for 15 s: Envoy 1.40 reports usage every 5 s
/// (whatever `reporting_interval` says), so a move of demand is seen within 5 s and shares
/// settle within 10. Every second admits at most the quota and the bound; the last three
/// seconds of each phase, once shares have settled, at least 90 % of the quota together.
#[tokio::test]
async fn three_envoys_two_instances_stay_within_the_quota_as_demand_moves() {
    let fleet = Fleet::start(2, &[0, 0, 1]).await;
    let limit = u32::try_from(LIMIT).unwrap();
    let counts = fleet
        .drive(&[(&[2 * limit, 0, 0], 10), (&[0, limit, limit], 15)])
        .await;
    eprintln!("admitted per second: {counts:?} (limit {LIMIT}, bound {BOUND})");
    for (second, count) in counts.iter().enumerate() {
        assert!(*count <= LIMIT + BOUND, "second {second}: {counts:?}");
    }
    // Once settled, over three seconds (a second's count moves with when requests land).
    at_least_nine_tenths(&counts, 7..10, LIMIT);
    at_least_nine_tenths(&counts, 22..25, LIMIT);
}

/// Redis, the counting upstream, `instances` `serve` instances of the page's files, and an
/// Envoy of the page's quota file per entry of `envoys` (the instance it asks): all running
/// until dropped.
struct Fleet {
    _redis: RedisServer,
    upstream: Upstream,
    dir: TempDir,
    instances: Vec<GatewayProcess>,
    envoys: Vec<SocketAddr>,
    _peers: Vec<Peer>,
    /// This fleet's turn: one fleet runs at a time (up to three Envoys, two instances and their
    /// load, timed by the second, beside the binary's other tests on a machine of two cores).
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// Whose turn it is to run a fleet.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Fleet {
    async fn start(instances: usize, envoys: &[usize]) -> Fleet {
        let turn = TURN.lock().await;
        let redis = RedisServer::start();
        let upstream = Upstream::start().await;
        let dir = TempDir::new("quota-live").unwrap();
        let config = write_files(dir.path(), &redis);
        let (processes, addrs): (Vec<_>, Vec<_>) =
            (0..instances).map(|_| start_instance(&config)).unzip();
        let (envoys, peers) = envoys
            .iter()
            .map(|instance| start_envoy(upstream.addr, addrs[*instance]))
            .unzip();
        Fleet {
            _redis: redis,
            upstream,
            dir,
            instances: processes,
            envoys,
            _peers: peers,
            _turn: turn,
        }
    }

    /// Drives each phase in turn (each Envoy's rate, and for how long); what the upstream
    /// admitted in each second of them.
    async fn drive(&self, phases: &[(&[u32], u64)]) -> Vec<usize> {
        let client = client();
        let started = Instant::now();
        for (rates, seconds) in phases {
            phase(&client, &self.envoys, rates, *seconds).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let seconds: u64 = phases.iter().map(|(_, seconds)| seconds).sum();
        self.upstream
            .per_second(started, usize::try_from(seconds).unwrap())
    }
}

/// What `seconds` admitted together is at least 90 % of `limit` a second.
fn at_least_nine_tenths(counts: &[usize], seconds: std::ops::Range<usize>, limit: usize) {
    let admitted: usize = counts[seconds.clone()].iter().sum();
    assert!(
        admitted * 10 >= seconds.len() * limit * 9,
        "seconds {seconds:?}: {counts:?}"
    );
}

/// Two Envoys, one per instance, each asking the quota: half each. The first instance is
/// killed: its Envoy's assignment expires (and then denies, as the page's file says), and its
/// share goes to the other Envoy once that assignment has expired. That Envoy then asks twice
/// the quota, so that its share, not its load generator's pace on a busy machine, is what the
/// upstream counts.
#[tokio::test]
async fn a_killed_instance_frees_its_envoys_share_for_the_others() {
    let mut fleet = Fleet::start(2, &[0, 1]).await;
    let limit = u32::try_from(LIMIT).unwrap();
    let before = fleet.drive(&[(&[limit, limit], 8)]).await;
    fleet.instances[0].child.kill().unwrap();
    let after = fleet.drive(&[(&[limit, 2 * limit], 8)]).await;
    let counts = [before, after].concat();
    eprintln!("admitted per second: {counts:?} (limit {LIMIT}, killed after 8 s)");
    for (second, count) in counts.iter().enumerate() {
        assert!(*count <= LIMIT + BOUND, "second {second}: {counts:?}");
    }
    // Envoy reports every 5 s: the shares settle after the first reports (seconds 3 to 5, a
    // lowered share held until its assignment expires), then hold.
    at_least_nine_tenths(&counts, 6..8, LIMIT);
    at_least_nine_tenths(&counts, 13..16, LIMIT);
}

/// A limit lowered in the files (seen within a second, no signal): the Envoy's assignment
/// follows at once.
#[tokio::test]
async fn a_limit_changed_by_a_reload_applies_to_the_envoys() {
    let fleet = Fleet::start(1, &[0]).await;
    let limit = u32::try_from(LIMIT).unwrap();
    let before = fleet.drive(&[(&[2 * limit], 6)]).await;
    let rules = fleet.dir.path().join("ratelimit/config/tenants.yaml");
    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(text.contains("        limit: 20\n"), "{text}");
    std::fs::write(
        &rules,
        text.replacen("        limit: 20\n", "        limit: 10\n", 1),
    )
    .unwrap();
    let after = fleet.drive(&[(&[2 * limit], 6)]).await;
    let counts = [before, after].concat();
    eprintln!("admitted per second: {counts:?} (limit {LIMIT}, then 10 after 6 s)");
    at_least_nine_tenths(&counts, 3..6, LIMIT);
    // The lowered limit: its quota, its burst and a token of rounding, and one new bucket.
    for second in 9..12 {
        assert!(
            counts[second] <= 10 + BURST + 1 + BURST,
            "second {second}: {counts:?}"
        );
    }
    at_least_nine_tenths(&counts, 9..12, 10);
}
