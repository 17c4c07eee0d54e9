//! The results, accumulated per mode over the rounds, and the table printed from them.

use testkit::BoxError;
use testkit::load::Outcome;

use crate::modes::Mode;

/// Everything measured for one mode, over every round.
pub(crate) struct Measured {
    pub(crate) mode: Mode,
    total: Outcome,
    per_round: Vec<f64>,
}

impl Measured {
    pub(crate) fn new(mode: Mode) -> Result<Self, BoxError> {
        Ok(Self {
            mode,
            total: Outcome::empty()?,
            per_round: Vec::new(),
        })
    }

    pub(crate) fn add(&mut self, slice: &Outcome) -> Result<(), BoxError> {
        self.total.merge(slice)?;
        self.per_round.push(slice.per_second());
        Ok(())
    }
}

/// Prints the markdown table: requests/s, the rounds' range, p50 and p99, and the ratio to
/// nginx's requests/s (and its p99 over nginx's) in the same run.
pub(crate) fn print(settings: &str, rows: Vec<Measured>) {
    let nginx = rows.iter().find(|row| row.mode == Mode::Nginx);
    let (nginx_rate, nginx_p99) = nginx.map_or((0.0, 0), |row| {
        (row.total.per_second(), row.total.micros_at(0.99))
    });
    println!();
    println!("{settings}");
    println!();
    println!(
        "| mode | requests/s | per round | p50 µs | p99 µs | refused | other status | ÷ nginx | p99 ÷ nginx |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let total = &row.total;
        let rate = total.per_second();
        let (low, high) = row
            .per_round
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(low, high), &r| {
                (low.min(r), high.max(r))
            });
        let ratio = |value: f64, base: f64| {
            if base > 0.0 {
                format!("{:.2}", value / base)
            } else {
                "-".to_owned()
            }
        };
        println!(
            "| {} | {:.0} | {:.0} – {:.0} | {} | {} | {:.1}% | {} | {} | {} |",
            row.mode.name(),
            rate,
            low,
            high,
            total.micros_at(0.5),
            total.micros_at(0.99),
            100.0 * total.denied as f64 / total.requests().max(1) as f64,
            total.other,
            ratio(rate, nginx_rate),
            ratio(total.micros_at(0.99) as f64, nginx_p99 as f64),
        );
    }
    if let (Some(nginx), Some(serve)) = (
        nginx,
        rows.iter().find(|row| row.mode == Mode::ServeAuthRequest),
    ) {
        let added = |quantile: f64| {
            serve.total.micros_at(quantile) as i64 - nginx.total.micros_at(quantile) as i64
        };
        println!();
        println!(
            "serve behind nginx's auth_request adds {} µs at p50 and {} µs at p99 to nginx's \
             requests (target: ≤ 500 µs at p99).",
            added(0.5),
            added(0.99)
        );
    }
    println!();
    println!(
        "requests/s: all rounds' requests over their time; per round: the lowest and highest \
         round; refused: 429 answers; other status: neither 2xx nor 429 (none expected); ÷ nginx: \
         requests/s over nginx's in the same run (targets: in-process store ≥ 0.9, Redis ≥ 0.8)."
    );
}
