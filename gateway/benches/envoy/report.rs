//! The table of the `envoy` benchmark, and what each mode cost Redis.

use testkit::load::{Measured, ratio};

use crate::modes::Mode;

/// What a mode's requests cost Redis, from `INFO commandstats` around its slices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RedisCost {
    requests: u64,
    script_calls: u64,
    script_usec: u64,
}

impl RedisCost {
    pub(crate) fn add(&mut self, calls: &testkit::commands::Calls, requests: u64) {
        self.requests += requests;
        self.script_calls += calls.scripts;
        self.script_usec += calls.scripts_usec;
    }

    /// Redis's µs per request, and its script calls per request; `None` for a mode that does
    /// not reach Redis (no request counted).
    fn per_request(&self) -> Option<(f64, f64)> {
        (self.requests > 0).then(|| {
            let requests = self.requests as f64;
            (
                self.script_usec as f64 / requests,
                self.script_calls as f64 / requests,
            )
        })
    }
}

/// Prints the markdown table: requests/s, the rounds' range, p50 and p99, the share refused,
/// the ratio to the bare handler's requests/s and to one raw EVALSHA per request's, and, for a
/// mode that reaches Redis, Redis's time and script calls per request (`costs`, by row).
pub(crate) fn print(settings: &str, rows: Vec<Measured<Mode>>, costs: &[RedisCost]) {
    let rate_of = |name: &str| {
        rows.iter()
            .find(|row| row.mode.name() == name)
            .map_or(0.0, |row| row.rounds.total.per_second())
    };
    let bare = |descriptors| rate_of(Mode::Bare { descriptors }.name());
    let evalsha = rate_of(Mode::Evalsha.name());
    let evalsha_us = rows
        .iter()
        .zip(costs)
        .find(|(row, _)| row.mode == Mode::Evalsha)
        .and_then(|(_, cost)| cost.per_request())
        .map_or(0.0, |(us, _)| us);
    println!();
    println!("{settings}");
    println!();
    println!(
        "| mode | requests/s | per round | p50 µs | p99 µs | over limit | errors | ÷ bare | ÷ EVALSHA | Redis µs / request | ÷ EVALSHA's | script calls / request |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (row, cost) in rows.iter().zip(costs) {
        let rate = row.rounds.total.per_second();
        let redis = match cost.per_request() {
            Some((us, calls)) => format!("{us:.1} | {} | {calls:.2}", ratio(us, evalsha_us)),
            None => "– | – | –".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {redis} |",
            row.mode.name(),
            row.rounds.cells(),
            ratio(rate, bare(row.mode.descriptors())),
            ratio(rate, evalsha),
        );
    }
    println!();
    println!(
        "requests/s: all rounds' requests over their time; per round: the lowest and highest \
         round; over limit: OVER_LIMIT answers; errors: gRPC errors (none expected); ÷ bare: \
         over the bare handler's requests/s with as many descriptors per request (targets: \
         in-process ≥ 0.8, Redis mostly denied ≥ 0.8); ÷ EVALSHA: over one raw EVALSHA per \
         request (target: Redis mostly allowed, one descriptor, ≥ 1); Redis µs / request: the \
         `usec` of Redis's script calls (`INFO commandstats`, the commands they ran included) \
         over the requests, and ÷ EVALSHA's: over the raw EVALSHA's; script calls / request: \
         FCALL and EVALSHA calls over the requests (a batch decides several requests in one)."
    );
}
