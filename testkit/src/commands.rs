//! The commands a Redis server ran, read from `INFO commandstats`: how many round trips to Redis
//! a request cost, and how much of Redis's time.

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

/// How many times Redis has run each command since it started, and for how long, from `INFO
/// commandstats`.
pub async fn command_calls(
    connection: &mut redis::aio::MultiplexedConnection,
) -> Result<HashMap<String, CommandStat>, BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await?;
    parse_command_stats(&info)
}

/// The CPU time the server's process has used, in seconds (`INFO cpu`: `used_cpu_sys` +
/// `used_cpu_user`): networking and parsing included, which commandstats leaves out, and not
/// inflated when the process waits for a core.
pub async fn used_cpu(connection: &mut redis::aio::MultiplexedConnection) -> Result<f64, BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(connection)
        .await?;
    let field = |name: &str| -> Result<f64, BoxError> {
        info.lines()
            .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| format!("no {name} in INFO cpu: {info}").into())
    };
    Ok(field("used_cpu_sys")? + field("used_cpu_user")?)
}

/// What Redis counted of one command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandStat {
    /// Times it ran.
    pub calls: u64,
    /// Microseconds of Redis's time it took, in all (a script's or a function's includes the
    /// commands it ran).
    pub usec: u64,
}

/// The calls per command of an `INFO commandstats` answer (`cmdstat_evalsha:calls=12,...`
/// becomes `"evalsha" => 12`).
pub fn parse_command_calls(info: &str) -> Result<HashMap<String, u64>, BoxError> {
    Ok(parse_command_stats(info)?
        .into_iter()
        .map(|(name, stat)| (name, stat.calls))
        .collect())
}

/// The calls and time per command of an `INFO commandstats` answer.
pub fn parse_command_stats(info: &str) -> Result<HashMap<String, CommandStat>, BoxError> {
    let mut stats = HashMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |wanted: &str| {
            fields
                .split(',')
                .find_map(|field| field.strip_prefix(wanted)?.strip_prefix('='))
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| format!("unexpected INFO commandstats line: {line}"))
        };
        stats.insert(
            name.to_owned(),
            CommandStat {
                calls: field("calls")?,
                usec: field("usec")?,
            },
        );
    }
    Ok(stats)
}

/// The commands Redis ran between two readings of [`command_calls`]: calls of scripts and
/// functions, and all others except the `INFO` the readings themselves send.
#[derive(Clone, Copy, Debug, Default)]
pub struct Calls {
    /// `FCALL` and `EVALSHA` calls: the limiter's round trips.
    pub scripts: u64,
    /// Microseconds of Redis's time those calls took (the commands they ran included).
    pub scripts_usec: u64,
    /// Every other command but `INFO`.
    pub other: u64,
}

impl Calls {
    /// The calls from reading `before` to reading `after`.
    pub fn between(
        before: &HashMap<String, CommandStat>,
        after: &HashMap<String, CommandStat>,
    ) -> Self {
        let mut calls = Self::default();
        for (name, stat) in after {
            let earlier = before.get(name).copied().unwrap_or_default();
            let delta = stat.calls.saturating_sub(earlier.calls);
            match name.as_str() {
                "info" => {}
                name if is_script_call(name) => {
                    calls.scripts += delta;
                    calls.scripts_usec += stat.usec.saturating_sub(earlier.usec);
                }
                _ => calls.other += delta,
            }
        }
        calls
    }

    /// Adds another interval's calls.
    pub fn add(&mut self, other: Self) {
        self.scripts += other.scripts;
        self.scripts_usec += other.scripts_usec;
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
