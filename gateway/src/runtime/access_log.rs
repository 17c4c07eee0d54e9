//! The access log: one line per request on standard output, as text or JSON. Lines are handed
//! to a thread of their own through a bounded queue, so a slow or full output never holds a
//! request up: when the queue is full, lines are dropped and counted
//! (`gateway_access_log_dropped_total`).

use std::io::Write as _;
use std::net::IpAddr;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Duration;

use http::Method;
use sha2::{Digest, Sha256};

use crate::config::AccessLogFormat;

/// Lines waiting for the writer before new ones are dropped.
const QUEUE: usize = 16 * 1024;

/// What one line says about a request.
#[derive(Debug)]
pub struct Entry<'a> {
    /// The request id (`X-Request-Id`).
    pub request_id: &'a str,
    /// The client's address: for `proxy` the TCP peer (none on a Unix socket), for `serve`
    /// the client of the request asked about.
    pub peer: Option<IpAddr>,
    /// The method.
    pub method: &'a Method,
    /// The path as routes matched it (normalised), without the query.
    pub path: &'a str,
    /// The status sent to the client.
    pub status: u16,
    /// The routes that limited it, the narrowest first, joined by `,` (none: no route).
    pub route: Option<&'a str>,
    /// The digest of its key ([`AccessLog::key_digest`]), if it has one.
    pub key: Option<&'a str>,
    /// What the limits decided: `allowed`, `denied`, `skipped` (a limit could not decide and let
    /// it through) or `unlimited` (no route).
    pub decision: &'a str,
    /// How long its routes' limits made it wait before it was served (`max_delay`), part of
    /// the latency.
    pub delay: Duration,
    /// From the request's head read to its response's head ready.
    pub latency: Duration,
    /// The upstream's status, when it answered.
    pub upstream_status: Option<u16>,
    /// An Envoy question's domain, descriptor count and overall code (`serve`'s gRPC).
    pub envoy: Option<EnvoyQuestion<'a>>,
}

/// What the access log says of a question of Envoy's rate limit service, beside the rest.
#[derive(Debug)]
pub struct EnvoyQuestion<'a> {
    /// The domain asked about.
    pub domain: &'a str,
    /// How many descriptors it holds.
    pub descriptors: usize,
    /// The overall code answered (`OK`, `OVER_LIMIT`, `UNKNOWN`).
    pub code: &'a str,
}

/// Where the lines go: cheap to clone.
#[derive(Clone, Debug)]
pub struct AccessLog {
    lines: Option<SyncSender<String>>,
    format: AccessLogFormat,
    /// Keys are logged as digests salted with this, so a log never holds a client's key (an
    /// address, an API key), nor a digest that a list of guesses could reverse. The same key
    /// has the same digest in one process's log until it restarts.
    secret: [u8; 16],
}

impl AccessLog {
    /// A log in `format`; `Off` writes nothing and starts no thread.
    pub fn new(format: AccessLogFormat) -> AccessLog {
        let lines = (format != AccessLogFormat::Off).then(|| {
            let (sender, receiver) = std::sync::mpsc::sync_channel::<String>(QUEUE);
            std::thread::Builder::new()
                .name("access-log".to_owned())
                .spawn(move || {
                    let stdout = std::io::stdout();
                    while let Ok(line) = receiver.recv() {
                        // Locked per batch, not for good: a test or an embedding program
                        // may print on it too. A closed or broken output stops nothing: the lines are lost.
                        let mut out = std::io::BufWriter::new(stdout.lock());
                        let _ = out.write_all(line.as_bytes());
                        while let Ok(line) = receiver.try_recv() {
                            let _ = out.write_all(line.as_bytes());
                        }
                        let _ = out.flush();
                    }
                })
                .map(|_| sender)
                .ok()
        });
        let mut secret = [0; 16];
        fastrand::fill(&mut secret);
        AccessLog {
            lines: lines.flatten(),
            format,
            secret,
        }
    }

    /// Whether lines are written.
    pub fn is_on(&self) -> bool {
        self.lines.is_some()
    }

    /// The digest of a key as the log shows it: 16 hexadecimal digits.
    pub fn key_digest(&self, key: &[u8]) -> String {
        let digest = Sha256::new()
            .chain_update(self.secret)
            .chain_update(key)
            .finalize();
        crate::hex::lower(&digest[..8])
    }

    /// Writes `entry`'s line (or drops it, counted, when the writer is behind).
    pub fn record(&self, entry: &Entry<'_>) {
        let Some(lines) = &self.lines else {
            return;
        };
        let line = match self.format {
            AccessLogFormat::Json => json(entry),
            _ => text(entry),
        };
        if let Err(TrySendError::Full(_)) = lines.try_send(line) {
            metrics::counter!("gateway_access_log_dropped_total").increment(1);
        }
    }
}

/// How long the rate limits of a request with these `extensions` made it wait before it was
/// served: what the access log's `delay_ms` says.
pub fn waited(extensions: &http::Extensions) -> Duration {
    extensions
        .get::<tower_redis_ratelimit::rate::Waited>()
        .map_or(
            Duration::ZERO,
            tower_redis_ratelimit::rate::Waited::duration,
        )
}

fn json(entry: &Entry<'_>) -> String {
    let mut object = serde_json::json!({
        "time": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        "request_id": entry.request_id,
        "client": entry.peer.map(|peer| peer.to_string()),
        "method": entry.method.as_str(),
        "path": entry.path,
        "status": entry.status,
        "route": entry.route,
        "key": entry.key,
        "decision": entry.decision,
        "latency_ms": milliseconds(entry.latency),
        "delay_ms": milliseconds(entry.delay),
        "upstream_status": entry.upstream_status,
    });
    if let (Some(envoy), Some(object)) = (&entry.envoy, object.as_object_mut()) {
        object.insert("domain".to_owned(), envoy.domain.into());
        object.insert("descriptors".to_owned(), envoy.descriptors.into());
        object.insert("code".to_owned(), envoy.code.into());
    }
    let mut line = object.to_string();
    line.push('\n');
    line
}

/// `latency` in milliseconds to the microsecond: `1.161`, not `1.1612040000000001` (a whole
/// number of microseconds divided by 1000 is the double nearest to its three decimals, which
/// JSON writes as the shortest text that reads back the same).
fn milliseconds(latency: Duration) -> f64 {
    latency.as_micros() as f64 / 1000.0
}

fn text(entry: &Entry<'_>) -> String {
    let dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
    let envoy = entry.envoy.as_ref().map_or(String::new(), |envoy| {
        format!(
            " domain={:?} descriptors={} code={}",
            envoy.domain, envoy.descriptors, envoy.code
        )
    });
    format!(
        "time={} request_id={} client={} method={} path={:?} status={} route={} key={} \
         decision={} latency_ms={:.3} delay_ms={:.3} upstream_status={}{envoy}\n",
        humantime::format_rfc3339_millis(std::time::SystemTime::now()),
        entry.request_id,
        dash(entry.peer.map(|peer| peer.to_string())),
        entry.method,
        entry.path,
        entry.status,
        entry.route.unwrap_or("-"),
        entry.key.unwrap_or("-"),
        entry.decision,
        entry.latency.as_secs_f64() * 1000.0,
        entry.delay.as_secs_f64() * 1000.0,
        dash(entry.upstream_status.map(|status| status.to_string())),
    )
}
