//! The load generator: closed-loop HTTP/1.1 over keep-alive connections.
//!
//! Each of N connections is a hand-rolled `hyper::client::conn::http1` connection that sends
//! `GET /` with an `x-key` header, waits for the whole response, and sends the next, until the
//! slice's time is up: N requests are in flight at any time, so the rate found is what the
//! server (and everything it shares the machine with) can answer, not a rate chosen in advance.
//! Latency is measured per request, from just before it is sent to the end of its body, into an
//! HDR histogram (microseconds, 3 significant digits).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::header::HOST;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::BoxError;

/// A request that takes longer than this fails the run instead of hanging it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// One slice of load.
pub struct Load {
    /// The servers to spread the connections over, in turn (connection `i` goes to target
    /// `i % targets.len()`).
    pub targets: Vec<SocketAddr>,
    /// Keep-alive connections, so requests in flight at any time.
    pub connections: usize,
    /// How long the slice lasts.
    pub duration: Duration,
    /// The `x-key` values, cycled through by all connections together: consecutive requests of
    /// the whole generator carry consecutive keys.
    pub keys: Arc<[HeaderValue]>,
}

/// What a slice of load measured.
pub struct Outcome {
    /// 2xx answers.
    pub ok: u64,
    /// 429 answers.
    pub denied: u64,
    /// Any other status: none is expected, so a benchmark reports them.
    pub other: u64,
    /// From the first connection attempt to the end of the last response.
    pub elapsed: Duration,
    /// Per-request latency in microseconds.
    pub latency: Histogram<u64>,
}

impl Outcome {
    /// Nothing measured yet.
    pub fn empty() -> Result<Self, BoxError> {
        Ok(Self {
            ok: 0,
            denied: 0,
            other: 0,
            elapsed: Duration::ZERO,
            // 1 µs to 60 s: REQUEST_TIMEOUT fails a run long before a latency leaves the range.
            latency: Histogram::new_with_bounds(1, 60_000_000, 3)?,
        })
    }

    /// Every answer, whatever its status.
    pub fn requests(&self) -> u64 {
        self.ok + self.denied + self.other
    }

    /// Answers per second of the slice.
    pub fn per_second(&self) -> f64 {
        self.requests() as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Adds another slice's counts, time and latencies (slices run one after another, so their
    /// times add up).
    pub fn merge(&mut self, other: &Self) -> Result<(), BoxError> {
        self.ok += other.ok;
        self.denied += other.denied;
        self.other += other.other;
        self.elapsed += other.elapsed;
        self.latency.add(&other.latency)?;
        Ok(())
    }

    /// A latency quantile (0.5, 0.99) in microseconds.
    pub fn micros_at(&self, quantile: f64) -> u64 {
        self.latency.value_at_quantile(quantile)
    }

    fn record(&mut self, status: StatusCode, latency: Duration) {
        match status {
            status if status.is_success() => self.ok += 1,
            StatusCode::TOO_MANY_REQUESTS => self.denied += 1,
            _ => self.other += 1,
        }
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency.saturating_record(micros.max(1));
    }
}

/// A benchmark mode's slices over every round: their sum, and each round's rate.
pub struct Rounds {
    /// Every slice's counts, time and latencies.
    pub total: Outcome,
    /// Each slice's answers per second, in round order.
    pub per_round: Vec<f64>,
}

impl Rounds {
    /// Nothing measured yet.
    pub fn new() -> Result<Self, BoxError> {
        Ok(Self {
            total: Outcome::empty()?,
            per_round: Vec::new(),
        })
    }

    /// Adds a round's slice.
    pub fn add(&mut self, slice: &Outcome) -> Result<(), BoxError> {
        self.total.merge(slice)?;
        self.per_round.push(slice.per_second());
        Ok(())
    }

    /// The lowest and highest round's rate.
    pub fn range(&self) -> (f64, f64) {
        self.per_round
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(low, high), &rate| {
                (low.min(rate), high.max(rate))
            })
    }

    /// The cells every benchmark's table starts a mode's row with: requests/s, the rounds'
    /// range, p50 and p99 in µs, the share refused and the other answers
    /// (`42000 | 40000 – 44000 | 700 | 2100 | 0.0% | 0`).
    pub fn cells(&self) -> String {
        let total = &self.total;
        let (low, high) = self.range();
        format!(
            "{:.0} | {low:.0} – {high:.0} | {} | {} | {:.1}% | {}",
            total.per_second(),
            total.micros_at(0.5),
            total.micros_at(0.99),
            100.0 * total.denied as f64 / total.requests().max(1) as f64,
            total.other,
        )
    }
}

/// One benchmark mode and what was measured of it over every round.
pub struct Measured<M> {
    /// The mode.
    pub mode: M,
    /// Its slices.
    pub rounds: Rounds,
}

impl<M> Measured<M> {
    /// `mode`, nothing measured yet.
    pub fn new(mode: M) -> Result<Self, BoxError> {
        Ok(Self {
            mode,
            rounds: Rounds::new()?,
        })
    }

    /// Adds a round's slice.
    pub fn add(&mut self, slice: &Outcome) -> Result<(), BoxError> {
        self.rounds.add(slice)
    }
}

/// `value / base` with two decimals, `-` without a base.
pub fn ratio(value: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}", value / base)
    } else {
        "-".to_owned()
    }
}

/// Runs one slice: opens the connections, keeps each busy until `load.duration` has passed, and
/// returns what they measured together. Must run inside a Tokio runtime with time enabled.
pub async fn drive(load: &Load) -> Result<Outcome, BoxError> {
    if load.targets.is_empty() || load.keys.is_empty() || load.connections == 0 {
        return Err("a load needs at least one target, one key and one connection".into());
    }
    let next_key = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + load.duration;
    let connections: Vec<_> = (0..load.connections)
        .map(|index| {
            let target = load.targets[index % load.targets.len()];
            let keys = Arc::clone(&load.keys);
            let next_key = Arc::clone(&next_key);
            tokio::spawn(connection(target, keys, next_key, deadline))
        })
        .collect();
    let mut total = Outcome::empty()?;
    for connection in connections {
        let outcome = connection.await??;
        total.merge(&outcome)?;
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// One keep-alive connection, sending requests one after another until `deadline`.
async fn connection(
    target: SocketAddr,
    keys: Arc<[HeaderValue]>,
    next_key: Arc<AtomicUsize>,
    deadline: Instant,
) -> Result<Outcome, BoxError> {
    let stream = TcpStream::connect(target)
        .await
        .map_err(|err| format!("could not connect to the app at {target}: {err}"))?;
    stream.set_nodelay(true)?;
    let (mut sender, driver) = http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(driver);
    let host = HeaderValue::from_str(&target.to_string())?;
    let mut outcome = Outcome::empty()?;
    while Instant::now() < deadline {
        let key = &keys[next_key.fetch_add(1, Ordering::Relaxed) % keys.len()];
        let request = Request::get("/")
            .header(HOST, host.clone())
            .header("x-key", key.clone())
            .body(Empty::<Bytes>::new())?;
        let exchange = async {
            sender.ready().await?;
            let sent = Instant::now();
            let response = sender.send_request(request).await?;
            let status = response.status();
            response.into_body().collect().await?;
            Ok::<_, hyper::Error>((status, sent.elapsed()))
        };
        let (status, latency) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{target} did not answer within {REQUEST_TIMEOUT:?}"))??;
        outcome.record(status, latency);
    }
    // Dropping the sender lets the connection close; its driver then ends.
    drop(sender);
    driver.await??;
    Ok(outcome)
}

/// The machine's 1-minute load average (Linux's `/proc/loadavg`), printed next to the results:
/// on a machine shared with other work, the results are only as quiet as this was.
pub fn load_average() -> Option<f64> {
    let line = std::fs::read_to_string("/proc/loadavg").ok()?;
    line.split_whitespace().next()?.parse().ok()
}
