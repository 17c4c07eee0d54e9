//! One Envoy's stream: its usage reports in, its assignments out.
//!
//! The first report of a bucket is its watch: the bucket is assigned at once, and from then
//! on settled again with every report of it (its demand updated) and whenever its
//! assignment is half way through its time to live, so that Envoy never lets it expire while
//! the stream lives; a reload settles every bucket at the next tick. A bucket whose rule left
//! the configuration is abandoned. When the stream ends, the Envoy's shares are left, freed
//! once its assignments have expired.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::metrics::Gauge;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::assignment::Assigned;
use super::metrics::{self, Series};
use super::rules::{DEFAULT_ASSIGNMENT_TTL, Found, Treatment};
use super::share::Timing;
use super::state::Inner;

/// The most demand reported to the shares, in requests per period: the split only needs
/// the proportions.
const MAX_DEMAND: u64 = (1 << 20) - 1;

/// The most buckets one stream holds: each is memory and, with the shares in Redis, a key. An
/// Envoy's filter makes as many buckets as its matchers' values; past this, a new bucket gets
/// no assignment (Envoy applies its `no_assignment_behavior`) and the stream warns once.
pub const MAX_BUCKETS: usize = 4_096;

/// The most bytes of a bucket id's keys and values together: a stream keeps each bucket's id
/// (and names its key in the shares' store by it), so [`MAX_BUCKETS`] bounds memory only with
/// this. Envoy's `bucket_id_builder` makes ids of a few short entries; a larger one gets no
/// assignment and the stream warns once.
pub const MAX_BUCKET_ID_BYTES: usize = 512;

/// How often a stream looks for assignments to renew and for a reload.
const TICK: Duration = Duration::from_millis(250);

/// What is added to an assignment's time to live for its way to Envoy and Envoy's timers
/// (the bound in `gateway/docs/envoy.md` assumes an assignment reaches Envoy within it).
pub const GRACE: Duration = Duration::from_millis(500);

/// A bucket of this stream.
struct Bucket {
    id: HashMap<String, String>,
    /// The buckets watched of its domain, which count it.
    watched: Gauge,
    /// What it was last sent, so that a change is logged.
    sent: Option<Assigned>,
    /// Requests asked per second (allowed and denied), as the last report says.
    rate: Option<f64>,
    last_report: Instant,
    /// The time between its last two reports: Envoy's `reporting_interval`, as seen here.
    interval: Duration,
    settled_at: Option<Instant>,
    /// The rules' generation it was last settled under.
    generation: u64,
    /// Whether a rule matched it when last settled.
    matched: bool,
    /// Whether it has an entry in the shares (a quota's bucket).
    shared: bool,
}

impl Bucket {
    /// Requests asked per second now: the last report's rate, or none when no report came
    /// for half an interval more than the last one (an Envoy that lost the bucket).
    fn demand(&self) -> f64 {
        let silent = self.last_report.elapsed();
        if silent > self.interval + self.interval / 2 {
            0.0
        } else {
            self.rate.unwrap_or(0.0)
        }
    }
}

/// Serves one stream until Envoy ends it, the answers can no longer be sent or the process
/// drains, then leaves its shares. `peer` is the Envoy's address (none on a Unix socket).
pub(super) async fn run(
    inner: Arc<Inner>,
    holder: String,
    peer: Option<SocketAddr>,
    mut reports: Streaming<RateLimitQuotaUsageReports>,
    answers: mpsc::Sender<Result<RateLimitQuotaResponse, Status>>,
) {
    let mut stream = Stream {
        inner,
        holder,
        domain: String::new(),
        series: Series::of("", false),
        series_generation: 0,
        buckets: HashMap::new(),
        warned: false,
        full_warned: false,
        oversize_warned: false,
        store_failing: false,
        reports: 0,
    };
    let opened = Instant::now();
    let peer = peer.map_or_else(|| "unix socket".to_owned(), |peer| peer.to_string());
    metrics::streams(1.0);
    tracing::info!(stream = %stream.holder, %peer, "an Envoy's quota stream opened");
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let closed = stream.inner.closed();
    tokio::pin!(closed);
    let ended = loop {
        let actions = tokio::select! {
            report = reports.message() => match report {
                Ok(Some(report)) => stream.reported(report).await,
                Ok(None) => break "the Envoy ended it",
                Err(_) => break "the stream broke",
            },
            _ = tick.tick() => stream.renew().await,
            () = answers.closed() => break "the Envoy stopped reading",
            () = &mut closed => break "the process drains",
        };
        if actions.is_empty() {
            continue;
        }
        let response = RateLimitQuotaResponse {
            bucket_action: actions,
        };
        if answers.send(Ok(response)).await.is_err() {
            break "the Envoy stopped reading";
        }
    };
    tracing::info!(
        stream = %stream.holder,
        %peer,
        domain = %stream.domain,
        buckets = stream.buckets.len(),
        reports = stream.reports,
        seconds = opened.elapsed().as_secs(),
        why = ended,
        "an Envoy's quota stream ended"
    );
    metrics::streams(-1.0);
    stream.leave().await;
}

struct Stream {
    inner: Arc<Inner>,
    holder: String,
    domain: String,
    /// The domain's metrics, as labelled under the rules of `series_generation`.
    series: Series,
    series_generation: u64,
    buckets: HashMap<String, Bucket>,
    /// Reports of a bucket received.
    reports: u64,
    /// Whether the domain was warned of as missing from the files.
    warned: bool,
    /// Whether the shares' store failed at the last settle (warned of once until it answers).
    store_failing: bool,
    /// Whether the stream was warned of as holding [`MAX_BUCKETS`].
    full_warned: bool,
    /// Whether the stream was warned of a bucket id beyond [`MAX_BUCKET_ID_BYTES`].
    oversize_warned: bool,
}

impl Stream {
    /// A report: each bucket's demand updated, and each settled.
    async fn reported(&mut self, report: RateLimitQuotaUsageReports) -> Vec<BucketAction> {
        // Envoy names the domain in every report; the protocol needs it in the first only.
        if !report.domain.is_empty() && report.domain != self.domain {
            self.domain = report.domain;
            self.series_generation = 0;
        }
        // Labelled anew after a reload too: the files may have gained or lost the domain.
        let generation = self.inner.generation();
        if self.series_generation != generation && !self.domain.is_empty() {
            let known = self.inner.in_force().rules().has(&self.domain);
            self.series = Series::of(&self.domain, known);
            self.series_generation = generation;
        }
        let now = Instant::now();
        let mut actions = Vec::new();
        for usage in report.bucket_quota_usages {
            let Some(id) = usage.bucket_id.map(|id| id.bucket) else {
                continue;
            };
            if id.is_empty() {
                continue;
            }
            let bytes: usize = id.iter().map(|(key, value)| key.len() + value.len()).sum();
            if bytes > MAX_BUCKET_ID_BYTES {
                if !self.oversize_warned {
                    self.oversize_warned = true;
                    tracing::warn!(
                        domain = %self.domain,
                        bytes,
                        most = MAX_BUCKET_ID_BYTES,
                        "an Envoy reports a bucket id larger than a stream takes: it gets no \
                         assignment"
                    );
                }
                continue;
            }
            self.reports += 1;
            self.series
                .reported(usage.num_requests_allowed, usage.num_requests_denied);
            let key = bucket_key(&self.domain, &id);
            if self.buckets.len() >= MAX_BUCKETS && !self.buckets.contains_key(&key) {
                if !self.full_warned {
                    self.full_warned = true;
                    tracing::warn!(
                        domain = %self.domain,
                        most = MAX_BUCKETS,
                        "an Envoy reports more buckets than a stream holds: the new ones get no \
                         assignment"
                    );
                }
                continue;
            }
            let asked = (usage.num_requests_allowed + usage.num_requests_denied) as f64;
            let watched = &self.series.watched;
            let bucket = self.buckets.entry(key.clone()).or_insert_with(|| {
                watched.increment(1.0);
                Bucket {
                    id,
                    watched: watched.clone(),
                    sent: None,
                    rate: None,
                    last_report: now,
                    interval: Duration::from_secs(1),
                    settled_at: None,
                    generation: 0,
                    matched: false,
                    shared: false,
                }
            });
            // Demand is what the last report says, per second: Envoy reports every
            // `reporting_interval`, which averages enough, and a share follows a move of
            // demand at the next report. The first report counts the request that opened
            // the bucket: taken as a second's.
            let elapsed = now.duration_since(bucket.last_report);
            bucket.rate = Some(match bucket.rate {
                Some(_) => {
                    bucket.interval = elapsed;
                    asked / elapsed.as_secs_f64().clamp(0.1, 60.0)
                }
                None => asked,
            });
            bucket.last_report = now;
            if let Some(action) = self.settle(&key).await {
                actions.push(action);
            }
        }
        actions
    }

    /// The buckets whose assignment is half way through its time to live, or that a reload
    /// may have changed, settled.
    async fn renew(&mut self) -> Vec<BucketAction> {
        let generation = self.inner.generation();
        let now = Instant::now();
        let due: Vec<String> = self
            .buckets
            .iter()
            .filter(|(_, bucket)| {
                let ttl = self
                    .found(bucket)
                    .map_or(DEFAULT_ASSIGNMENT_TTL, |found| found.ttl);
                bucket.generation != generation
                    || bucket
                        .settled_at
                        .is_none_or(|at| now.duration_since(at) >= ttl / 2)
            })
            .map(|(key, _)| key.clone())
            .collect();
        let mut actions = Vec::new();
        for key in due {
            if let Some(action) = self.settle(&key).await {
                actions.push(action);
            }
        }
        actions
    }

    fn found(&self, bucket: &Bucket) -> Option<Found> {
        self.inner.in_force().find(&self.domain, &bucket.id)
    }

    /// Settles the bucket `key`: its assignment, or nothing when the store cannot answer
    /// (the assignment in force stays until it expires).
    async fn settle(&mut self, key: &str) -> Option<BucketAction> {
        let generation = self.inner.generation();
        let bucket = self.buckets.get(key)?;
        let found = match self.found(bucket) {
            Some(found) => found,
            None => {
                if !self.warned {
                    self.warned = true;
                    tracing::warn!(
                        domain = %self.domain,
                        "an Envoy reports buckets of a domain without `extensions.quota_service` in the Envoy files: denied"
                    );
                }
                Found {
                    treatment: Treatment::DenyAll,
                    ttl: DEFAULT_ASSIGNMENT_TTL,
                    matched: false,
                }
            }
        };
        let timing = timing(found.ttl);
        if bucket.matched && !found.matched {
            // Its rule is gone: Envoy forgets the bucket and reports it anew, to be assigned
            // what an unmatched bucket gets.
            let bucket = self.buckets.remove(key)?;
            bucket.watched.decrement(1.0);
            if bucket.shared {
                let _ = self
                    .inner
                    .shares(&self.domain)
                    .leave(key, &self.holder, timing)
                    .await;
            }
            self.sent(key, &bucket, Assigned::Abandon);
            return Some(Assigned::Abandon.action(&bucket.id, found.ttl));
        }
        let assigned = match found.treatment {
            Treatment::Quota(quota) => {
                let period = quota.period().as_secs_f64();
                // Below 2^20, so that the Lua twin's arithmetic (doubles) is exact.
                let demand = ((bucket.demand() * period).ceil() as u64).min(MAX_DEMAND);
                let limit = u64::from(quota.limit());
                match self
                    .inner
                    .shares(&self.domain)
                    .settle(key, &self.holder, demand, limit, timing)
                    .await
                {
                    Ok(share) => {
                        self.store_failing = false;
                        Some(Assigned::share(quota, share))
                    }
                    Err(error) => {
                        // Once per failure, not once per bucket and retry.
                        if !std::mem::replace(&mut self.store_failing, true) {
                            tracing::warn!(%error, domain = %self.domain, "the quota service's store failed: assignments are kept until they expire, none is granted");
                        }
                        None
                    }
                }
            }
            Treatment::AllowAll => Some(Assigned::AllowAll),
            Treatment::DenyAll => Some(Assigned::DenyAll),
        };
        let shared = matches!(found.treatment, Treatment::Quota(_));
        let bucket = self.buckets.get_mut(key)?;
        if bucket.shared && !shared {
            let _ = self
                .inner
                .shares(&self.domain)
                .leave(key, &self.holder, timing)
                .await;
        }
        let bucket = self.buckets.get_mut(key)?;
        bucket.generation = generation;
        bucket.matched = found.matched;
        bucket.shared = shared;
        let assigned = assigned?;
        bucket.settled_at = Some(Instant::now());
        let action = assigned.action(&bucket.id, found.ttl);
        let bucket = self.buckets.get(key)?;
        self.sent(key, bucket, assigned);
        self.buckets.get_mut(key)?.sent = Some(assigned);
        Some(action)
    }

    /// `assigned` is sent for the bucket `key`: counted, and logged when it changes what the
    /// bucket was sent before (the bucket named by its digest, as its key in Redis is, never
    /// by its values: they may be a client's).
    fn sent(&self, key: &str, bucket: &Bucket, assigned: Assigned) {
        self.series.sent(assigned == Assigned::Abandon);
        if bucket.sent != Some(assigned) {
            tracing::debug!(
                stream = %self.holder,
                domain = %self.domain,
                bucket = %super::shares::digest(key),
                from = %bucket.sent.map_or_else(|| "nothing".to_owned(), |sent| sent.to_string()),
                to = %assigned,
                "a bucket's assignment changed"
            );
        }
    }

    /// The stream ended: every share of this Envoy left.
    async fn leave(self) {
        for (key, bucket) in &self.buckets {
            bucket.watched.decrement(1.0);
            if bucket.shared {
                let ttl = self
                    .found(bucket)
                    .map_or(DEFAULT_ASSIGNMENT_TTL, |found| found.ttl);
                let _ = self
                    .inner
                    .shares(&self.domain)
                    .leave(key, &self.holder, timing(ttl))
                    .await;
            }
        }
    }
}

/// The timing of a bucket whose assignments live `ttl`: a share changes at most once per
/// time to live and grace, so that a share lowered has stopped being held before it is
/// lowered again (an entry holds one lowered share at a time: see `share::Entry::lower`).
fn timing(ttl: Duration) -> Timing {
    let ms = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    Timing {
        ttl_ms: ms(ttl),
        grace_ms: ms(GRACE),
        min_change_ms: ms(ttl + GRACE),
    }
}

/// What names a bucket of a domain in the shares: the domain and the bucket id's entries in
/// key order, as JSON (so that no two buckets share a name).
pub(super) fn bucket_key(domain: &str, id: &HashMap<String, String>) -> String {
    let mut entries: Vec<(&String, &String)> = id.iter().collect();
    entries.sort();
    serde_json::to_string(&(domain, entries)).unwrap_or_default()
}
