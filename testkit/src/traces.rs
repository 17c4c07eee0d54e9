//! Request traces shared by the accuracy study (`benches/accuracy.rs`) and the chart
//! (`benches/chart.rs`), so both measure the algorithms on requests made the same way.
//!
//! A trace is a list of requests, each a time in microseconds since the Unix epoch and a client,
//! sorted by time. The random parts take a seeded [`fastrand::Rng`], so every run of a study
//! sees the same requests and prints the same numbers.

use std::time::Duration;

use fastrand::Rng;

/// The start of every trace: a whole minute (and so a whole second, ten seconds ...) since the
/// epoch, so the sliding window's epoch-aligned sub-intervals start with the trace.
pub const START_MICROS: u64 = 1_699_999_980_000_000;

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// When it arrives, in µs since the Unix epoch.
    pub at: u64,
    /// Which client sends it (each client is its own rate-limit key).
    pub client: u32,
}

/// A trace under construction: requests are added in any order and sorted by [`Trace::finish`].
#[derive(Debug, Default)]
pub struct Trace {
    requests: Vec<Request>,
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// `count` requests of `client` starting `at` (µs from the trace start), `spacing` apart.
    pub fn burst(&mut self, client: u32, at: Duration, count: u32, spacing: Duration) -> &mut Self {
        for i in 0..count {
            self.push(client, at + spacing * i);
        }
        self
    }

    /// Evenly spaced requests of `client` at `per_second`, from `from` until before `to`.
    pub fn steady(
        &mut self,
        client: u32,
        from: Duration,
        to: Duration,
        per_second: f64,
    ) -> &mut Self {
        let gap = Duration::from_secs_f64(1.0 / per_second);
        let mut at = from;
        while at < to {
            self.push(client, at);
            at += gap;
        }
        self
    }

    /// A Poisson process of `client` at `per_second` on average, from `from` until before `to`:
    /// exponentially distributed gaps, as independent users produce.
    pub fn poisson(
        &mut self,
        rng: &mut Rng,
        client: u32,
        from: Duration,
        to: Duration,
        per_second: f64,
    ) -> &mut Self {
        let mut at = from.as_secs_f64();
        loop {
            at += exponential(rng, 1.0 / per_second);
            if at >= to.as_secs_f64() {
                return self;
            }
            self.push(client, Duration::from_secs_f64(at));
        }
    }

    /// An on/off source: Poisson at `on_per_second` for on-phases of `on` seconds on average,
    /// silent for off-phases of `off` seconds on average (both exponentially distributed), from
    /// `from` until before `to`. Crawlers and batch jobs look like this.
    #[allow(clippy::too_many_arguments)]
    pub fn on_off(
        &mut self,
        rng: &mut Rng,
        client: u32,
        from: Duration,
        to: Duration,
        on_per_second: f64,
        on: Duration,
        off: Duration,
    ) -> &mut Self {
        let mut at = from;
        while at < to {
            let on_ends =
                (at + Duration::from_secs_f64(exponential(rng, on.as_secs_f64()))).min(to);
            self.poisson(rng, client, at, on_ends, on_per_second);
            at = on_ends + Duration::from_secs_f64(exponential(rng, off.as_secs_f64()));
        }
        self
    }

    /// Bursts at the boundaries of `window` (windows aligned to the trace start): in every window,
    /// `count` requests in the last `spread` before its end and `count` in the first `spread` of
    /// the next, each burst's requests at uniformly random times. This is the traffic that makes a
    /// fixed window admit twice its limit, and that puts a whole previous window's count at its
    /// very end, where the sliding window counter assumes it was spread evenly.
    pub fn window_edges(
        &mut self,
        rng: &mut Rng,
        client: u32,
        window: Duration,
        windows: u32,
        count: u32,
        spread: Duration,
    ) -> &mut Self {
        for edge in 1..=windows {
            let boundary = window * edge;
            for _ in 0..count {
                self.push(client, boundary - uniform(rng, spread));
                self.push(client, boundary + uniform(rng, spread));
            }
        }
        self
    }

    /// The requests, sorted by time (stable: requests of one instant keep the order added).
    pub fn finish(&mut self) -> Vec<Request> {
        let mut requests = std::mem::take(&mut self.requests);
        requests.sort_by_key(|request| request.at);
        requests
    }

    fn push(&mut self, client: u32, offset: Duration) {
        let offset = u64::try_from(offset.as_micros()).unwrap_or(u64::MAX);
        self.requests.push(Request {
            at: START_MICROS + offset,
            client,
        });
    }
}

/// An exponentially distributed number with the given mean.
fn exponential(rng: &mut Rng, mean: f64) -> f64 {
    // 1 - f64() lies in (0, 1], so the logarithm is finite.
    -(1.0 - rng.f64()).ln() * mean
}

/// A uniformly random duration in `[0, up_to)`, in whole microseconds.
fn uniform(rng: &mut Rng, up_to: Duration) -> Duration {
    let micros = u64::try_from(up_to.as_micros()).unwrap_or(u64::MAX).max(1);
    Duration::from_micros(rng.u64(0..micros))
}
