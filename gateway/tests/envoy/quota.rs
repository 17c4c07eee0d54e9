//! Envoy's rate limit quota service as `serve` runs it, spoken to by a tonic client of
//! envoy-types standing in for Envoys: the first report of a bucket answered with its
//! assignment, renewed before its time to live ends; the quota split by demand, a share
//! lowered before another is raised; a stream that ends freeing its share once its assignment
//! has expired; blanket and unmatched buckets; a rule removed by a reload abandoning its
//! buckets; TCP and the Unix socket.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaUsageReports};
use testkit::TempDir;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::process::GatewayProcess;
use crate::support::unix_channel;

/// A domain whose tenants have 20 requests a second each, burst 4, across the fleet;
/// `internal` is not limited, anything else is denied.
pub(crate) const RULES: &str = r#"
domain: edge
extensions:
  quota_service:
    buckets:
      - bucket: { name: tenant, tenant: "*" }
        limit: 20
        period: 1s
        burst: 4
      - bucket: { name: internal }
        blanket: allow_all
"#;

/// What a bucket was assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// A token bucket: tokens per fill (per second here), and its burst.
    Tokens {
        per_fill: u32,
        burst: u32,
    },
    Allow,
    Deny,
    Abandon,
}

/// `serve` with `rules` in `rules/edge.yaml`, on a TCP port and a Unix socket, its admin
/// address at `admin`.
struct Service {
    process: GatewayProcess,
    dir: TempDir,
    addr: String,
    socket: PathBuf,
    admin: std::net::SocketAddr,
}

impl Service {
    fn start(rules: &str) -> Service {
        Self::start_with(rules, "")
    }

    /// With the stores of `stores` (TOML) in its file, and its domain's shares in the store
    /// the rules name.
    fn start_with(rules: &str, stores: &str) -> Service {
        Self::start_logging(rules, stores, &[])
    }

    /// With `env` in its environment (`RUST_LOG`).
    /// The text of the service's `/metrics`.
    async fn scrape(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    fn start_logging(rules: &str, stores: &str, env: &[(&str, &str)]) -> Service {
        let dir = TempDir::new("envoy-quota").unwrap();
        std::fs::create_dir(dir.path().join("rules")).unwrap();
        std::fs::write(dir.path().join("rules").join("edge.yaml"), rules).unwrap();
        let socket = dir.path().join("serve.sock");
        let config = dir.path().join("serve.toml");
        let admin = crate::process::free_addr();
        std::fs::write(
            &config,
            format!(
                "{stores}\n[serve]\nlisten = \"127.0.0.1:0\"\nsocket = {socket:?}\n\
                 admin = \"{admin}\"\n\n[serve.envoy]\nfiles = \"rules\"\n"
            ),
        )
        .unwrap();
        let (process, line, _stdout) = GatewayProcess::start_with_env("serve", &config, None, env);
        let addr = line
            .strip_prefix("serve: listening on ")
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("{line}"))
            .to_owned();
        Service {
            process,
            dir,
            addr,
            socket,
            admin,
        }
    }

    async fn envoy(&self) -> Envoy {
        let channel = Channel::from_shared(self.addr.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        Envoy::open(channel).await
    }

    fn rules(&self) -> PathBuf {
        self.dir.path().join("rules").join("edge.yaml")
    }
}

/// An Envoy's stream: reports sent, and every assignment received with when it came.
struct Envoy {
    reports: mpsc::Sender<RateLimitQuotaUsageReports>,
    seen: Arc<Mutex<Vec<(Instant, Seen)>>>,
}

impl Envoy {
    async fn open(channel: Channel) -> Envoy {
        let (reports, receiver) = mpsc::channel(16);
        let outgoing = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|report| (report, receiver))
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let collected = Arc::clone(&seen);
        tokio::spawn(async move {
            let mut client = RateLimitQuotaServiceClient::new(channel);
            let response = client.stream_rate_limit_quotas(outgoing).await;
            let mut answers = response.expect("the stream opened").into_inner();
            while let Ok(Some(answer)) = answers.message().await {
                for action in answer.bucket_action {
                    assert!(action.bucket_id.is_some_and(|id| !id.bucket.is_empty()));
                    let seen = match action.bucket_action.expect("an action") {
                        Action::AbandonAction(_) => Seen::Abandon,
                        Action::QuotaAssignmentAction(assignment) => {
                            assert!(
                                assignment.assignment_time_to_live.is_some(),
                                "{assignment:?}"
                            );
                            let strategy = assignment.rate_limit_strategy.unwrap().strategy;
                            match strategy.expect("a strategy") {
                                Strategy::TokenBucket(bucket) => {
                                    assert_eq!(bucket.fill_interval.unwrap().seconds, 1);
                                    Seen::Tokens {
                                        per_fill: bucket.tokens_per_fill.unwrap().value,
                                        burst: bucket.max_tokens,
                                    }
                                }
                                Strategy::BlanketRule(rule)
                                    if rule == BlanketRule::AllowAll as i32 =>
                                {
                                    Seen::Allow
                                }
                                Strategy::BlanketRule(_) => Seen::Deny,
                                other => panic!("not a strategy of this service: {other:?}"),
                            }
                        }
                    };
                    collected.lock().unwrap().push((Instant::now(), seen));
                }
            }
        });
        Envoy { reports, seen }
    }

    /// Reports `allowed` and `denied` requests of `bucket`.
    async fn report(&self, bucket: &[(&str, &str)], allowed: u64, denied: u64) {
        self.report_in("edge", bucket, allowed, denied).await;
    }

    /// Reports `allowed` and `denied` requests of `bucket` of `domain`.
    async fn report_in(&self, domain: &str, bucket: &[(&str, &str)], allowed: u64, denied: u64) {
        let report = RateLimitQuotaUsageReports {
            domain: domain.to_owned(),
            bucket_quota_usages: vec![BucketQuotaUsage {
                bucket_id: Some(BucketId {
                    bucket: bucket
                        .iter()
                        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                        .collect(),
                }),
                time_elapsed: None,
                num_requests_allowed: allowed,
                num_requests_denied: denied,
            }],
        };
        self.reports.send(report).await.expect("the stream is open");
    }

    /// Every assignment so far, in order.
    fn seen(&self) -> Vec<(Instant, Seen)> {
        self.seen.lock().unwrap().clone()
    }

    /// Sends `report`, then waits up to 5 s for `count` assignments in all.
    async fn send_until_assigned(&self, report: RateLimitQuotaUsageReports, count: usize) {
        self.reports.send(report).await.expect("the stream is open");
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.seen().len() < count {
            assert!(Instant::now() < deadline, "{} assigned", self.seen().len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits up to 4 s (a reload seen, then the next tick) for `wanted` to be the latest
    /// assignment.
    async fn waits_for(&self, wanted: Seen) {
        let started = Instant::now();
        while self.latest().await != wanted {
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "no {wanted:?}: {:?}",
                self.seen()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The latest assignment, waiting up to 2 s for a first one.
    async fn latest(&self) -> Seen {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            if let Some((_, seen)) = self.seen().last() {
                return *seen;
            }
            assert!(Instant::now() < deadline, "no assignment within 2 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

const ACME: [(&str, &str); 2] = [("name", "tenant"), ("tenant", "acme")];

/// One request admitted in the bucket of `tenant`.
fn tenant_usage(tenant: String) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(BucketId {
            bucket: [("name", "tenant".to_owned()), ("tenant", tenant)]
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        }),
        time_elapsed: None,
        num_requests_allowed: 1,
        num_requests_denied: 0,
    }
}

/// An Envoy reporting more buckets than a stream holds (a client's memory on the service is
/// bounded): the first `MAX_BUCKETS` are assigned, the rest get nothing, in that report and in
/// the next.
#[tokio::test]
async fn a_stream_holds_at_most_max_buckets() {
    use ratelimit_gateway::envoy::quota::MAX_BUCKETS;
    let service = Service::start(RULES);
    let envoy = service.envoy().await;
    let usage = |tenant: usize| tenant_usage(format!("t{tenant}"));
    let report = RateLimitQuotaUsageReports {
        domain: "edge".to_owned(),
        bucket_quota_usages: (0..MAX_BUCKETS + 10).map(usage).collect(),
    };
    envoy.send_until_assigned(report, MAX_BUCKETS).await;
    // Renewals come at half the time to live (1 s): before them, nothing beyond the bound.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(envoy.seen().len(), MAX_BUCKETS);
    let report = RateLimitQuotaUsageReports {
        domain: "edge".to_owned(),
        bucket_quota_usages: vec![usage(MAX_BUCKETS + 1)],
    };
    envoy
        .reports
        .send(report)
        .await
        .expect("the stream is open");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(envoy.seen().len(), MAX_BUCKETS);
}

/// A bucket id beyond `MAX_BUCKET_ID_BYTES` (a hostile client's way to grow the service's
/// memory within `MAX_BUCKETS`) is not kept: the stream watches only the bucket of a usual id
/// reported beside it, and assigns only that one.
#[tokio::test]
async fn a_bucket_id_too_large_is_not_kept() {
    use ratelimit_gateway::envoy::quota::MAX_BUCKET_ID_BYTES;
    let service = Service::start_logging(RULES, "", &[]);
    let envoy = service.envoy().await;
    let report = RateLimitQuotaUsageReports {
        domain: "edge".to_owned(),
        bucket_quota_usages: vec![
            tenant_usage("x".repeat(MAX_BUCKET_ID_BYTES)),
            tenant_usage("acme".to_owned()),
        ],
    };
    envoy.send_until_assigned(report, 1).await;
    // Renewals come at half the time to live (1 s): before them, only the usual bucket.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(envoy.seen().len(), 1, "{:?}", envoy.seen());
    let scraped = service.scrape().await;
    assert_eq!(
        series(
            &scraped,
            "gateway_quota_buckets_watched",
            &[("domain", "edge")]
        ),
        Some(1.0),
        "{scraped}"
    );
}

fn share(seen: Seen) -> u32 {
    match seen {
        Seen::Tokens { per_fill, .. } => per_fill,
        Seen::Deny => 0,
        other => panic!("not a share: {other:?}"),
    }
}

#[tokio::test]
async fn a_first_report_is_assigned_at_once_and_renewed_before_it_expires() {
    let service = Service::start(RULES);
    let envoy = service.envoy().await;
    let opened = Instant::now();
    envoy.report(&ACME, 1, 0).await;
    assert_eq!(
        envoy.latest().await,
        Seen::Tokens {
            per_fill: 20,
            burst: 4
        }
    );
    assert!(opened.elapsed() < Duration::from_millis(500));
    // No more reports: renewed at half its time to live (2 s), each time before it expires.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let seen = envoy.seen();
    assert!(seen.len() >= 3, "{seen:?}");
    for pair in seen.windows(2) {
        assert!(
            pair[1].0 - pair[0].0 < Duration::from_millis(1_600),
            "{seen:?}"
        );
        assert_eq!(pair[1].1, seen[0].1);
    }
}

#[tokio::test]
async fn blanket_and_unmatched_buckets_over_the_unix_socket() {
    let service = Service::start(RULES);
    let envoy = Envoy::open(unix_channel(&service.socket).await).await;
    envoy.report(&[("name", "internal")], 1, 0).await;
    assert_eq!(envoy.latest().await, Seen::Allow);
    let other = Envoy::open(unix_channel(&service.socket).await).await;
    other
        .report(&[("name", "internal"), ("env", "prod")], 1, 0)
        .await;
    assert_eq!(other.latest().await, Seen::Deny);
}

/// Two Envoys asking 40 a second each of a quota of 20: 10 each once settled, and the second
/// raised only once the first one's assignment of 20, sent before it was lowered, has expired
/// (had the lowering not reached it): the shares in force never sum past 20.
#[tokio::test]
async fn the_quota_follows_demand_and_a_share_is_lowered_before_another_is_raised() {
    let service = Service::start(RULES);
    let (a, b) = (service.envoy().await, service.envoy().await);
    a.report(&ACME, 20, 0).await;
    assert_eq!(share(a.latest().await), 20);
    b.report(&ACME, 0, 20).await;
    assert_eq!(share(b.latest().await), 0, "the whole quota is a's");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(9) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        a.report(&ACME, 10, 10).await;
        b.report(&ACME, 0, 20).await;
    }
    let (a_seen, b_seen) = (a.seen(), b.seen());
    let last_twenty = a_seen
        .iter()
        .filter(|(_, seen)| share(*seen) == 20)
        .map(|(at, _)| *at)
        .max()
        .unwrap();
    let first_raise = b_seen
        .iter()
        .find(|(_, seen)| share(*seen) > 0)
        .map(|(at, _)| *at)
        .unwrap_or_else(|| panic!("b never got a share: {b_seen:?}"));
    assert!(
        first_raise >= last_twenty + Duration::from_secs(2),
        "b raised {:?} after a's last 20: {a_seen:?} {b_seen:?}",
        first_raise - last_twenty
    );
    let (a_now, b_now) = (
        share(a_seen.last().unwrap().1),
        share(b_seen.last().unwrap().1),
    );
    assert!(a_now + b_now <= 20, "{a_now} + {b_now}");
    assert!(
        (9..=11).contains(&a_now) && (9..=11).contains(&b_now),
        "{a_now} {b_now}"
    );
}

/// An Envoy that goes away keeps its assignment until it expires: its share goes to another
/// only then.
#[tokio::test]
async fn a_stream_that_ends_frees_its_share_once_its_assignment_has_expired() {
    let service = Service::start(RULES);
    let a = service.envoy().await;
    a.report(&ACME, 1, 0).await;
    assert_eq!(share(a.latest().await), 20);
    let b = service.envoy().await;
    b.report(&ACME, 0, 5).await;
    assert_eq!(share(b.latest().await), 0);
    let last_sent = a.seen().last().unwrap().0;
    drop(a);
    gets_the_whole_quota_once_expired(&b, last_sent).await;
}

/// `envoy`, reporting demand, gets the whole quota within 6 s, and not before the time to
/// live (2 s) of an assignment of it sent elsewhere at `last_sent` has passed.
async fn gets_the_whole_quota_once_expired(envoy: &Envoy, last_sent: Instant) {
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        envoy.report(&ACME, 0, 5).await;
        let seen = envoy.seen();
        if let Some((at, _)) = seen.iter().find(|(_, seen)| share(*seen) > 0) {
            assert!(*at >= last_sent + Duration::from_secs(2), "{seen:?}");
            assert_eq!(share(seen.last().unwrap().1), 20);
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(6), "{seen:?}");
    }
}

/// A rule removed from the files (seen within a second, no signal): its buckets are abandoned,
/// and a bucket reported anew gets what an unmatched one does.
#[tokio::test]
async fn a_rule_removed_by_a_reload_abandons_its_buckets() {
    let service = Service::start(RULES);
    let envoy = service.envoy().await;
    envoy.report(&ACME, 1, 0).await;
    assert_eq!(share(envoy.latest().await), 20);
    write_rules(
        &service.rules(),
        "domain: edge\nextensions:\n  quota_service:\n    unmatched: { blanket: allow_all }\n",
    );
    envoy.waits_for(Seen::Abandon).await;
    envoy.report(&ACME, 1, 0).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(envoy.latest().await, Seen::Allow);
}

/// Rewrites the rules so that the watcher sees a change even within the same second.
fn write_rules(path: &Path, rules: &str) {
    std::fs::write(path, rules).unwrap();
}

/// [`RULES`] with their shares in the store `shared`, a Redis at `redis`, and the stores'
/// TOML.
fn in_redis(redis: &testkit::RedisServer) -> (String, String) {
    let rules = RULES.replace(
        "domain: edge\nextensions:\n",
        "domain: edge\nextensions:\n  store: shared\n",
    );
    let stores = format!(
        "[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\n",
        redis.url()
    );
    (rules, stores)
}

/// Two `serve` instances keeping their shares in one Redis: an Envoy of each shares the
/// quota; when one instance is killed, its Envoy's share goes to the other only once its
/// assignment has expired.
#[tokio::test]
async fn instances_on_one_redis_share_the_quota_and_a_killed_one_frees_its_share() {
    let redis = testkit::RedisServer::start();
    let (rules, stores) = in_redis(&redis);
    let (first, mut second) = (
        Service::start_with(&rules, &stores),
        Service::start_with(&rules, &stores),
    );
    let a = second.envoy().await;
    a.report(&ACME, 20, 0).await;
    assert_eq!(share(a.latest().await), 20);
    let b = first.envoy().await;
    b.report(&ACME, 0, 20).await;
    assert_eq!(
        share(b.latest().await),
        0,
        "the whole quota is a's, on the other instance"
    );
    second.process.child.kill().unwrap();
    let last_sent = a.seen().last().unwrap().0;
    gets_the_whole_quota_once_expired(&b, last_sent).await;
}

/// Redis down: the assignments in force are not renewed (they expire at Envoy, whose
/// `expired_assignment_behavior` then applies), and a new bucket is given nothing.
#[tokio::test]
async fn with_redis_down_no_share_is_renewed_or_granted() {
    let mut redis = testkit::RedisServer::start();
    let (rules, stores) = in_redis(&redis);
    let service = Service::start_with(&rules, &stores);
    let a = service.envoy().await;
    a.report(&ACME, 1, 0).await;
    assert_eq!(share(a.latest().await), 20);
    redis.kill();
    let down = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = a.seen().len();
    a.report(&ACME, 5, 0).await;
    a.report(&[("name", "tenant"), ("tenant", "globex")], 1, 0)
        .await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let after: Vec<_> = a
        .seen()
        .into_iter()
        .skip(before)
        .filter(|(at, _)| *at > down + Duration::from_millis(200))
        .collect();
    assert!(after.is_empty(), "{after:?}");
}

/// `check` says where the quota service answers and each domain's bucket rules, and names a
/// bad rule's file and field.
#[test]
fn check_describes_the_quota_service_and_names_a_bad_field() {
    let dir = TempDir::new("envoy-quota-check").unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules").join("edge.yaml"), RULES).unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        "[serve]\nlisten = \"127.0.0.1:0\"\n\n[serve.envoy]\nfiles = \"rules\"\n",
    )
    .unwrap();
    let summary = ratelimit_gateway::check::check(&config).expect("valid");
    assert!(
        summary.contains(
            "envoy quota service: /envoy.service.rate_limit_quota.v3.RateLimitQuotaService/"
        ) && summary.contains("domain edge (")
            && summary.contains("edge.yaml): 2 bucket rules"),
        "{summary}"
    );
    write_rules(
        &dir.path().join("rules").join("edge.yaml"),
        &RULES.replace("period: 1s", "period: 1500ms"),
    );
    let error = ratelimit_gateway::check::check(&config)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("edge.yaml: `extensions.quota_service.buckets[0].period`: \"1500ms\""),
        "{error}"
    );
}

/// SIGTERM: the streams end as the drain starts (Envoy reconnects elsewhere), so `serve`
/// exits without waiting for its drain timeout (30 s).
#[tokio::test]
async fn a_drain_ends_the_streams() {
    let mut service = Service::start(RULES);
    let envoy = service.envoy().await;
    envoy.report(&ACME, 1, 0).await;
    assert_eq!(share(envoy.latest().await), 20);
    service.process.signal("-TERM");
    // The drain starts after `drain_delay` (5 s by default).
    service
        .process
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}

/// The value of the series of `name` with every label of `labels` in a scrape.
fn series(scrape: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let (labelled, value) = rest.rsplit_once(' ')?;
        let all = labels
            .iter()
            .all(|(key, value)| labelled.contains(&format!("{key}=\"{value}\"")));
        (all && (labelled.is_empty() || labelled.starts_with('{'))).then(|| value.parse().unwrap())
    })
}

/// What the quota streams say on `/metrics` and on standard error: the streams open, the
/// buckets watched, each report and the requests it counts, each action sent; a domain the
/// files do not have counted under `domain=""`; a line when a stream opens and ends, and one
/// (at `debug`) when a bucket's assignment changes, not when it is renewed unchanged.
#[tokio::test]
async fn streams_are_counted_and_logged() {
    let service = Service::start_logging(
        RULES,
        "",
        &[("RUST_LOG", "info,ratelimit_gateway::envoy::quota=debug")],
    );
    let scrape = async || service.scrape().await;
    let edge = [("domain", "edge")];
    let before = scrape().await;
    assert_eq!(
        series(&before, "gateway_quota_streams_open", &[]),
        Some(0.0),
        "{before}"
    );
    for (name, labels) in [
        ("gateway_quota_reports_total", &edge[..]),
        ("gateway_quota_buckets_watched", &edge),
        (
            "gateway_quota_assignments_total",
            &[("domain", "edge"), ("action", "abandon")],
        ),
        (
            "gateway_quota_requests_total",
            &[("domain", "edge"), ("decision", "denied")],
        ),
    ] {
        assert_eq!(series(&before, name, labels), Some(0.0), "{name}: {before}");
    }

    let a = service.envoy().await;
    a.report(&ACME, 3, 1).await;
    assert_eq!(share(a.latest().await), 20);
    let elsewhere = service.envoy().await;
    elsewhere
        .report_in("elsewhere", &[("name", "x")], 0, 2)
        .await;
    assert_eq!(elsewhere.latest().await, Seen::Deny);
    // Renewed unchanged at half the time to live (2 s): counted, not logged.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let during = scrape().await;
    let value = |name: &str, labels: &[(&str, &str)]| series(&during, name, labels);
    assert_eq!(
        value("gateway_quota_streams_open", &[]),
        Some(2.0),
        "{during}"
    );
    assert_eq!(value("gateway_quota_buckets_watched", &edge), Some(1.0));
    assert_eq!(
        value("gateway_quota_buckets_watched", &[("domain", "")]),
        Some(1.0)
    );
    assert_eq!(value("gateway_quota_reports_total", &edge), Some(1.0));
    let requests = |domain, decision| {
        value(
            "gateway_quota_requests_total",
            &[("domain", domain), ("decision", decision)],
        )
    };
    assert_eq!(requests("edge", "allowed"), Some(3.0));
    assert_eq!(requests("edge", "denied"), Some(1.0));
    assert_eq!(requests("", "denied"), Some(2.0));
    let assigned = value(
        "gateway_quota_assignments_total",
        &[("domain", "edge"), ("action", "assign")],
    )
    .unwrap();
    assert_eq!(assigned, a.seen().len() as f64);
    assert!(assigned >= 2.0, "renewed: {during}");
    assert!(!during.contains("elsewhere"), "{during}");

    write_rules(
        &service.rules(),
        "domain: edge\nextensions:\n  quota_service:\n    unmatched: { blanket: allow_all }\n",
    );
    a.waits_for(Seen::Abandon).await;
    drop(elsewhere);
    let after = async || {
        let scraped = scrape().await;
        (
            series(&scraped, "gateway_quota_streams_open", &[]),
            series(&scraped, "gateway_quota_buckets_watched", &edge),
            series(
                &scraped,
                "gateway_quota_assignments_total",
                &[("domain", "edge"), ("action", "abandon")],
            ),
        )
    };
    let started = Instant::now();
    while after().await != (Some(1.0), Some(0.0), Some(1.0)) {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{}",
            scrape().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The lines, in order: each stream opened, each assignment change (the first of each
    // bucket, then the abandon; no renewal), the stream that ended.
    let process = &service.process;
    process.message_containing("an Envoy's quota stream opened");
    let first = process.message_containing("a bucket's assignment changed");
    assert!(
        first.contains("domain=edge") && first.contains("from=nothing to=20 per 1s, burst 4"),
        "{first}"
    );
    process.message_containing("an Envoy's quota stream opened");
    let denied = process.message_containing("a bucket's assignment changed");
    assert!(
        denied.contains("domain=elsewhere") && denied.contains("to=deny_all"),
        "{denied}"
    );
    let abandoned = process.message_containing("a bucket's assignment changed");
    assert!(
        abandoned.contains("from=20 per 1s, burst 4 to=abandon"),
        "{abandoned}"
    );
    let ended = process.message_containing("an Envoy's quota stream ended");
    assert!(
        ended.contains("domain=elsewhere") && ended.contains("buckets=1 reports=1"),
        "{ended}"
    );
}

/// A domain the files gain by a reload is labelled from then on, on the streams already open:
/// until then, its reports are counted under `domain=""`.
#[tokio::test]
async fn a_domain_added_by_a_reload_is_labelled_on_the_streams_open() {
    let service = Service::start(RULES);
    let requests = async |domain: &str| {
        let scraped = service.scrape().await;
        series(
            &scraped,
            "gateway_quota_requests_total",
            &[("domain", domain), ("decision", "denied")],
        )
    };
    let envoy = service.envoy().await;
    envoy.report_in("later", &[("name", "x")], 0, 1).await;
    assert_eq!(envoy.latest().await, Seen::Deny);
    assert_eq!(requests("").await, Some(1.0));
    write_rules(
        &service.dir.path().join("rules").join("later.yaml"),
        "domain: later\nextensions:\n  quota_service:\n    unmatched: { blanket: allow_all }\n",
    );
    envoy.waits_for(Seen::Allow).await;
    envoy.report_in("later", &[("name", "x")], 0, 2).await;
    let started = Instant::now();
    while requests("later").await != Some(2.0) {
        assert!(started.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(requests("").await, Some(1.0));
}
