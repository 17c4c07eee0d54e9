//! Redis memory per client key for each algorithm, as `cargo bench --bench memory_usage`
//! measured it: read from the table that program printed into `docs/algorithms.md`, so that the
//! chart and that page show the same numbers (rerun it and update the page to refresh both).

use testkit::BoxError;

/// The page the table is read from, compiled in.
const ALGORITHMS_PAGE: &str = include_str!("../../docs/algorithms.md");
/// The header line of `memory_usage`'s table.
const TABLE_HEADER: &str = "| algorithm | state | Redis type | elements | bytes (`MEMORY USAGE`) |";

/// One measured state: what it is, and its bytes in Redis.
pub(crate) struct PerKey {
    pub(crate) label: String,
    pub(crate) bytes: u64,
}

/// The rows of `memory_usage`'s table in `docs/algorithms.md`.
pub(crate) fn per_key() -> Result<Vec<PerKey>, BoxError> {
    let missing = "docs/algorithms.md has no table of `cargo bench --bench memory_usage` (its \
                   header line changed?)";
    let table = ALGORITHMS_PAGE
        .split_once(TABLE_HEADER)
        .ok_or(missing)?
        .1
        .lines()
        .skip(2) // the rest of the header line, and the |---| line
        .take_while(|line| line.starts_with('|'));
    let mut rows = Vec::new();
    for line in table {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [algorithm, _state, _kind, elements, bytes] = cells.as_slice() else {
            return Err(format!("unexpected row in docs/algorithms.md: {line}").into());
        };
        rows.push(PerKey {
            label: format!("{algorithm} ({elements})"),
            bytes: bytes
                .parse()
                .map_err(|_| format!("not a byte count in docs/algorithms.md: {line}"))?,
        });
    }
    if rows.is_empty() {
        return Err(missing.into());
    }
    Ok(rows)
}

pub(crate) fn print(rows: &[PerKey]) {
    println!("\nRedis memory per client key (docs/algorithms.md, from `--bench memory_usage`):\n");
    println!("| state | bytes |");
    println!("|---|---:|");
    for row in rows {
        println!("| {} | {} |", row.label, row.bytes);
    }
}
