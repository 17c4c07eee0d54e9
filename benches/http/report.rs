//! The results of a run, accumulated per scenario and mode over the rounds, and the table printed
//! from them.

use crate::modes::{Mode, Scenario};
use testkit::BoxError;
use testkit::commands::Calls;
use testkit::load::Outcome;

/// Everything measured for one mode in one scenario, over every round.
pub(crate) struct Measured {
    pub(crate) mode: Mode,
    /// All of its slices together.
    pub(crate) total: Outcome,
    /// Requests per second in each round, to show how much the rounds varied.
    pub(crate) per_round: Vec<f64>,
    /// The Redis commands run during its slices.
    pub(crate) calls: Calls,
}

impl Measured {
    pub(crate) fn new(mode: Mode) -> Result<Self, BoxError> {
        Ok(Self {
            mode,
            total: Outcome::empty()?,
            per_round: Vec::new(),
            calls: Calls::default(),
        })
    }

    pub(crate) fn add(&mut self, slice: &Outcome, calls: Calls) -> Result<(), BoxError> {
        self.total.merge(slice)?;
        self.per_round.push(slice.per_second());
        self.calls.add(calls);
        Ok(())
    }

    pub(crate) fn per_request(&self, count: u64) -> f64 {
        count as f64 / self.total.requests().max(1) as f64
    }
}

/// Prints one scenario's rows of the markdown table (the header comes from [`print_header`]).
pub(crate) fn print_rows(scenario: &Scenario, rows: &[Measured]) {
    let rate_of = |mode: Mode| {
        rows.iter()
            .find(|row| row.mode == mode)
            .map(|row| row.total.per_second())
    };
    let (none, floor) = (rate_of(Mode::None), rate_of(Mode::Floor));
    let ratio = |rate: f64, base: Option<f64>| match base {
        Some(base) if base > 0.0 => format!("{:.2}", rate / base),
        _ => "-".to_owned(),
    };
    for row in rows {
        let total = &row.total;
        let rate = total.per_second();
        let (low, high) = row
            .per_round
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(low, high), &r| {
                (low.min(r), high.max(r))
            });
        println!(
            "| {} | {} | {:.0} | {:.0} – {:.0} | {} | {} | {:.2}% | {} | {:.3} | {:.2} | {:.3} | {} | {} |",
            scenario.name,
            row.mode.name(),
            rate,
            low,
            high,
            total.micros_at(0.5),
            total.micros_at(0.99),
            100.0 * row.per_request(total.denied),
            total.other,
            row.per_request(row.calls.scripts),
            row.per_request(row.calls.scripts_usec),
            row.per_request(row.calls.other),
            ratio(rate, none),
            ratio(rate, floor),
        );
    }
}

pub(crate) fn print_header() {
    println!(
        "| scenario | mode | requests/s | per round | p50 µs | p99 µs | denied | other status | \
         calls/req | Redis µs/req | other cmds/req | ÷ none | ÷ floor |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
}

/// Prints the targets of `docs/performance.md` as this run measured them: `rows` by scenario, in
/// [`SCENARIOS`](crate::modes::SCENARIOS)' order.
pub(crate) fn print_targets(rows: &[Vec<Measured>]) {
    let find = |scenario: usize, mode: Mode| rows[scenario].iter().find(|row| row.mode == mode);
    let rate = |scenario: usize, mode: Mode| find(scenario, mode).map(|row| row.total.per_second());
    let ratio = |scenario: usize, mode: Mode, base: Mode| match (
        rate(scenario, mode),
        rate(scenario, base),
    ) {
        (Some(rate), Some(base)) if base > 0.0 => format!("{:.2}", rate / base),
        _ => "-".to_owned(),
    };
    let calls = |scenario: usize, mode: Mode| {
        find(scenario, mode).map_or("-".to_owned(), |row| {
            format!("{:.3}", row.per_request(row.calls.scripts))
        })
    };
    let usec = |scenario: usize, mode: Mode| {
        find(scenario, mode).map_or("-".to_owned(), |row| {
            format!("{:.2}", row.per_request(row.calls.scripts_usec))
        })
    };
    let (allowed, hot, abusive, saturated) = (0, 1, 2, 3);
    println!("| target | measured |");
    println!("|---|---|");
    println!(
        "| exact path on many keys ≥ 1.0 × the floor | `redis-exact` ÷ `floor` on `allowed`: {} (`redis-alone`: {}, `redis-scripts`: {}) |",
        ratio(allowed, Mode::RedisExact, Mode::Floor),
        ratio(allowed, Mode::RedisAlone, Mode::Floor),
        ratio(allowed, Mode::RedisScripts, Mode::Floor),
    );
    println!(
        "| what batching and functions save Redis | Redis µs/req on `allowed`: `redis-alone` {}, `redis-scripts` {}, `redis-exact` {}, `floor` {} |",
        usec(allowed, Mode::RedisAlone),
        usec(allowed, Mode::RedisScripts),
        usec(allowed, Mode::RedisExact),
        usec(allowed, Mode::Floor),
    );
    println!(
        "| one abusive key ≥ 0.95 × no limiter | `redis` ÷ `none` on `abusive`: {}; `memory` ÷ `none`: {} |",
        ratio(abusive, Mode::Redis, Mode::None),
        ratio(abusive, Mode::Memory, Mode::None),
    );
    println!(
        "| saturated hot key with leases ≤ 0.1 calls/req | `redis-leases` on `saturated`: {} (`redis`: {}) |",
        calls(saturated, Mode::RedisLeases),
        calls(saturated, Mode::Redis),
    );
    println!(
        "| leases on many cold keys ≥ 0.98 × without | `redis-leases` ÷ `redis` on `allowed`: {} |",
        ratio(allowed, Mode::RedisLeases, Mode::Redis),
    );
    println!(
        "| memory store ≥ 1.0 × tower_governor admitting | `memory` ÷ `governor`: {} (`allowed`), {} (`hot`); ÷ `governor-headers`: {} (`allowed`), {} (`hot`); `memory-bare` ÷ `governor`: {} (`allowed`), {} (`hot`) |",
        ratio(allowed, Mode::Memory, Mode::Governor),
        ratio(hot, Mode::Memory, Mode::Governor),
        ratio(allowed, Mode::Memory, Mode::GovernorHeaders),
        ratio(hot, Mode::Memory, Mode::GovernorHeaders),
        ratio(allowed, Mode::MemoryBare, Mode::Governor),
        ratio(hot, Mode::MemoryBare, Mode::Governor),
    );
}
