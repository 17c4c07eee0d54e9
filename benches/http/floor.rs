//! The floor: the least a Redis-backed limiter can do per request without deciding locally.
//!
//! No limiter layer: the handler itself makes one `EVALSHA` of a minimal GCRA script on one
//! shared redis-rs `MultiplexedConnection` and answers 200 or 429 from its reply. No headers, no
//! report, no deadline, no failure handling beyond a 503: what remains is one round trip and the
//! least work Redis can do for a GCRA decision. A limiter that asks Redis on every request cannot
//! beat it; one that does better must decide some requests without Redis.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::modes::Scenario;
use testkit::BoxError;
use testkit::commands;

/// GCRA in its textbook form: the state is the theoretical arrival time (TAT) in µs, on the Redis
/// server's clock. A request is admitted when the new TAT is at most the burst tolerance ahead of
/// now; only then is it written, with a TTL at the moment the bucket is empty again.
/// `%d` formats the doubles Lua computes in as integers: plain `tostring` keeps 14 digits only.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = math.max(tonumber(redis.call('GET', KEYS[1])) or now, now)
local next_tat = tat + interval
if next_tat - now > tolerance then return 0 end
redis.call('SET', KEYS[1], string.format('%d', next_tat),
  'PX', string.format('%d', math.ceil((next_tat - now) / 1000)))
return 1
";

#[derive(Clone)]
struct Floor {
    connection: MultiplexedConnection,
    script: Script,
    /// The time between two admitted requests at the quota's rate, in µs.
    interval: u64,
    /// How far ahead of now the TAT may be: `interval` times the burst.
    tolerance: u64,
    /// Keeps each scenario's state apart from the others' and from the crate's.
    prefix: String,
}

/// The floor's app for `scenario`, on a connection of its own to `url`.
pub(crate) async fn router(scenario: &Scenario, url: &str) -> Result<Router, BoxError> {
    let mut connection = commands::connect(url).await?;
    let script = Script::new(GCRA);
    // Loaded once now, so every request is an EVALSHA that finds it.
    script.load_async(&mut connection).await?;
    let interval = 1_000_000 / u64::from(scenario.per_second);
    let state = Floor {
        connection,
        script,
        interval,
        tolerance: interval * u64::from(scenario.burst),
        prefix: format!("floor:{}:", scenario.name),
    };
    Ok(Router::new().route("/", get(decide)).with_state(state))
}

async fn decide(State(floor): State<Floor>, headers: HeaderMap) -> (StatusCode, &'static str) {
    let Some(key) = headers.get("x-key") else {
        return (StatusCode::BAD_REQUEST, "no x-key");
    };
    let mut connection = floor.connection.clone();
    let mut key_name = Vec::with_capacity(floor.prefix.len() + key.len() + 2);
    key_name.extend_from_slice(floor.prefix.as_bytes());
    key_name.push(b'{');
    key_name.extend_from_slice(key.as_bytes());
    key_name.push(b'}');
    let admitted: Result<i64, _> = floor
        .script
        .key(key_name)
        .arg(floor.interval)
        .arg(floor.tolerance)
        .invoke_async(&mut connection)
        .await;
    match admitted {
        Ok(1) => (StatusCode::OK, "ok"),
        Ok(_) => (StatusCode::TOO_MANY_REQUESTS, "too many requests"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis failed"),
    }
}
