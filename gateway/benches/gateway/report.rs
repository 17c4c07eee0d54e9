//! The results, accumulated per mode over the rounds, and the table printed from them.

use testkit::load::{Measured, ratio};

use crate::modes::Mode;

/// Prints the markdown table: requests/s, the rounds' range, p50 and p99, and the ratio to
/// nginx's requests/s (and its p99 over nginx's) in the same run.
pub(crate) fn print(settings: &str, rows: Vec<Measured<Mode>>) {
    let nginx = rows.iter().find(|row| row.mode == Mode::Nginx);
    let (nginx_rate, nginx_p99) = nginx.map_or((0.0, 0), |row| {
        (
            row.rounds.total.per_second(),
            row.rounds.total.micros_at(0.99),
        )
    });
    println!();
    println!("{settings}");
    println!();
    println!(
        "| mode | requests/s | per round | p50 µs | p99 µs | refused | other status | ÷ nginx | p99 ÷ nginx |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let total = &row.rounds.total;
        println!(
            "| {} | {} | {} | {} |",
            row.mode.name(),
            row.rounds.cells(),
            ratio(total.per_second(), nginx_rate),
            ratio(total.micros_at(0.99) as f64, nginx_p99 as f64),
        );
    }
    if let (Some(nginx), Some(serve)) = (
        nginx,
        rows.iter().find(|row| row.mode == Mode::ServeAuthRequest),
    ) {
        let added = |quantile: f64| {
            serve.rounds.total.micros_at(quantile) as i64
                - nginx.rounds.total.micros_at(quantile) as i64
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
