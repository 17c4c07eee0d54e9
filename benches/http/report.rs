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

    fn per_request(&self, count: u64) -> f64 {
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
            "| {} | {} | {:.0} | {:.0} – {:.0} | {} | {} | {:.2}% | {} | {:.3} | {:.3} | {} | {} |",
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
            row.per_request(row.calls.other),
            ratio(rate, none),
            ratio(rate, floor),
        );
    }
}

pub(crate) fn print_header() {
    println!(
        "| scenario | mode | requests/s | per round | p50 µs | p99 µs | denied | other status | \
         calls/req | other cmds/req | ÷ none | ÷ floor |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
}
