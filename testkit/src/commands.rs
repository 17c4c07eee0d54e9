//! The commands a Redis server ran, read from `INFO commandstats`: how many round trips to Redis
//! a request cost.

use std::collections::HashMap;

use crate::BoxError;

/// A connection of the benchmark's own, for reading counters: separate from the ones under test.
pub async fn connect(url: &str) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    let client = redis::Client::open(url)?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|err| format!("could not connect to {url}: {err}").into())
}

/// How many times Redis has run each command since it started, from `INFO commandstats`
/// (`cmdstat_evalsha:calls=12,...` becomes `"evalsha" => 12`).
pub async fn command_calls(
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<HashMap<String, u64>, BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await?;
    parse_command_calls(&info)
}

/// The calls per command of an `INFO commandstats` answer.
pub fn parse_command_calls(info: &str) -> Result<HashMap<String, u64>, BoxError> {
    let mut calls = HashMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let count = fields
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
            .and_then(|count| count.parse().ok())
            .ok_or_else(|| format!("unexpected INFO commandstats line: {line}"))?;
        calls.insert(name.to_owned(), count);
    }
    Ok(calls)
}

/// The commands Redis ran between two readings of [`command_calls`]: calls of scripts and
/// functions, and all others except the `INFO` the readings themselves send.
#[derive(Clone, Copy, Debug, Default)]
pub struct Calls {
    /// `FCALL` and `EVALSHA` calls: the limiter's round trips.
    pub scripts: u64,
    /// Every other command but `INFO`.
    pub other: u64,
}

impl Calls {
    /// The calls from reading `before` to reading `after`.
    pub fn between(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> Self {
        let mut calls = Self::default();
        for (name, &count) in after {
            let delta = count.saturating_sub(before.get(name).copied().unwrap_or(0));
            match name.as_str() {
                name if is_script_call(name) => calls.scripts += delta,
                "info" => {}
                _ => calls.other += delta,
            }
        }
        calls
    }

    /// Adds another interval's calls.
    pub fn add(&mut self, other: Self) {
        self.scripts += other.scripts;
        self.other += other.other;
    }
}

/// Whether `INFO commandstats` names a call of a script or a function (`fcall`, `evalsha`, their
/// read-only forms, `eval`).
pub fn is_script_call(name: &str) -> bool {
    matches!(
        name,
        "fcall" | "fcall_ro" | "evalsha" | "evalsha_ro" | "eval" | "eval_ro"
    )
}
