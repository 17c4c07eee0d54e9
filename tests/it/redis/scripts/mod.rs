//! What the decision script does to Redis: it survives `FUNCTION FLUSH` and `SCRIPT FLUSH` (the
//! store loads its code again), every key it writes carries a TTL, a request that is not admitted
//! (denied, never admissible, or a cost-0 peek) writes nothing at all, and state found far ahead
//! of the server's clock is replaced rather than honoured.
//!
//! What it writes (TTLs, and nothing for a request not admitted) is in `writes`.

mod writes;

use std::time::{Duration, SystemTime};

use crate::support::{RedisServer, cost, get as send, header};
use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::decision::Outcome;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

const PEER: &str = "192.0.2.9:6000";
/// Long, so that these tests check what Redis holds, never a timeout on a busy machine.
const DEADLINE: Duration = Duration::from_secs(2);

fn layer(store: &RedisStore, rules: Vec<Rule>) -> RateLimitLayer {
    let mut builder = RateLimitLayer::builder()
        .key(HeaderKey::new("x-client"))
        .store(store.clone())
        .deadline(DEADLINE)
        .cost(cost);
    for rule in rules {
        builder = builder.rule(rule);
    }
    builder.build().unwrap()
}

/// Three routes on one store:
/// - `/fw`: a fixed window of 3 per hour (key `ratelimit:fw:fw-1h:{client}`);
/// - `/gcra`: GCRA, 2 per minute (key `ratelimit:g:gcra-2/1m:{client}`);
/// - `/multi`: 5 per hour (fixed window) and 2 per hour (GCRA), checked together.
fn app(redis: &RedisServer) -> Router {
    let store = RedisStore::open(&redis.url()).unwrap();
    let ok = || async { "ok" };
    Router::new()
        .route(
            "/fw",
            get(ok).layer(layer(
                &store,
                vec![Rule::fixed_window("fw", Quota::per_hour(3))],
            )),
        )
        .route(
            "/gcra",
            get(ok).layer(layer(&store, vec![Rule::gcra("g", Quota::per_minute(2))])),
        )
        .route(
            "/multi",
            get(ok).layer(layer(
                &store,
                vec![
                    Rule::fixed_window("m-fw", Quota::per_hour(5)),
                    Rule::gcra("m-g", Quota::per_hour(2)),
                ],
            )),
        )
}

/// The period of the rule a key belongs to, in ms: no TTL may exceed it.
fn period_ms(key: &str) -> i64 {
    match key.split(':').nth(1) {
        Some("fw" | "m-fw" | "m-g") => 3_600_000,
        Some("g") => 60_000,
        _ => panic!("unexpected key {key:?}"),
    }
}

/// Sends a request and returns its status and `Rate-Limiting-State`.
async fn request(app: &Router, uri: &str, client: &str, cost: u32) -> (StatusCode, String) {
    let cost = cost.to_string();
    let response = send(app, uri, PEER, &[("x-client", client), ("x-cost", &cost)]).await;
    (response.status(), header(&response, "rate-limiting-state"))
}

/// The server's count of writes (`rdb_changes_since_last_save`): any write by a script, even a
/// TTL refresh alone, moves it.
fn writes(redis: &RedisServer) -> u64 {
    redis.info("persistence", "rdb_changes_since_last_save")
}

/// What the server holds of the store's code: cached scripts, or function libraries.
fn loaded(redis: &RedisServer, functions: bool) -> u64 {
    if functions {
        redis.info("memory", "number_of_libraries")
    } else {
        redis.info("memory", "number_of_cached_scripts")
    }
}

/// After `FUNCTION FLUSH` the next `FCALL` finds no function, and after `SCRIPT FLUSH` the next
/// `EVALSHA` gets `NOSCRIPT` (a store with functions off, as on Redis 6.2): either way the store
/// loads its code again and sends the call again, so decisions go on, counting from where they
/// were: at the start, in the middle, right before a denial, and under concurrency (every
/// concurrent caller finds the code gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_continue_after_the_code_is_flushed() {
    for functions in [true, false] {
        let redis = RedisServer::start();
        let store = RedisStore::builder(&redis.url())
            .functions(functions)
            .build()
            .unwrap();
        flushed_and_reloaded(&redis, &store, functions).await;
        let calls = redis.command_calls();
        let (used, unused) = if functions {
            ("fcall", "evalsha")
        } else {
            ("evalsha", "fcall")
        };
        assert!(calls.get(used).is_some_and(|&n| n > 0), "{calls:?}");
        assert_eq!(calls.get(unused), None, "{calls:?}");
    }
}

async fn flushed_and_reloaded(redis: &RedisServer, store: &RedisStore, functions: bool) {
    let layer = layer(
        store,
        vec![
            Rule::fixed_window("fw", Quota::per_hour(5)),
            Rule::gcra("g", Quota::per_hour(5)),
        ],
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let shared = &app;
    let counted = |used: u64| async move {
        let response = send(shared, "/", PEER, &[("x-client", "alice")]).await;
        assert_eq!(response.status(), StatusCode::OK, "request {used}");
        assert_eq!(header(&response, "rate-limiting-state"), "Allow");
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            used.to_string(),
            "request {used}"
        );
    };
    let flush = || {
        let kind = if functions { "FUNCTION" } else { "SCRIPT" };
        assert_eq!(redis.cli(&[kind, "FLUSH"]), "OK");
        assert_eq!(loaded(redis, functions), 0);
    };

    counted(1).await;
    assert_eq!(loaded(redis, functions), 1);
    flush();
    counted(2).await;
    assert_eq!(loaded(redis, functions), 1, "loaded again");
    counted(3).await;
    counted(4).await;
    flush();
    counted(5).await;
    flush();
    let response = send(&app, "/", PEER, &[("x-client", "alice")]).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&response, "rate-limiting-state"), "Deny");
    assert_eq!(redis.cli(&["HGET", "ratelimit:fw:fw-1h:{alice}", "n"]), "5");

    // Twenty concurrent callers all find the code gone; the quota of 5 still holds exactly.
    flush();
    let concurrent: Vec<_> = (0..20)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let response = send(&app, "/", PEER, &[("x-client", "bob")]).await;
                (response.status(), header(&response, "rate-limiting-state"))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for request in concurrent {
        answers.push(request.await.unwrap());
    }
    let allowed = answers
        .iter()
        .filter(|a| *a == &(StatusCode::OK, "Allow".to_owned()))
        .count();
    let denied = answers
        .iter()
        .filter(|a| *a == &(StatusCode::TOO_MANY_REQUESTS, "Deny".to_owned()))
        .count();
    assert_eq!((allowed, denied), (5, 15), "{answers:?}");
    assert_eq!(redis.cli(&["HGET", "ratelimit:fw:fw-1h:{bob}", "n"]), "5");
}

/// State that no rule of this quota could have written, planted ahead of the server's clock by
/// far more than the rule's span (as another quota's state, a key from before a clock step back,
/// or a hand-made key would be), is never honoured: it counts as no state, the next admission
/// replaces it, and neither the reported waits nor the key's TTL go beyond what the rule itself
/// can need. Without this, the sliding window's case (second-indexes read as minute-indexes)
/// answered a reset ~1e17 µs away and set a TTL of ~3,000 years.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_state_far_ahead_of_the_clock_is_replaced_not_honoured() {
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    let client = Key::from("mallory");
    // The year 2255 in µs: 2^53 - 1, the largest time a script holds exactly.
    let far = "9007199254740991";
    // This second's index, which a window of minute-long sub-intervals reads as ~1.7e9 minutes
    // ahead (the same machine runs Redis, so its clock is this one).
    let seconds = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let gcra_level = format!("{far}:2000000");
    let log_member = format!("{far}:1");
    // Each rule, what is planted in its key, and the longest reset (and TTL) it can need: the
    // window's period, the sliding window's period and a sub-interval, the bucket's drain time.
    let minute = 60_000_000;
    let cases: [(Rule, Vec<&str>, u64); 5] = [
        (
            Rule::fixed_window("fw", Quota::per_minute(3)),
            vec!["HSET", "s", far, "n", "3"],
            minute,
        ),
        (
            Rule::sliding_log("log", Quota::per_minute(3)),
            vec!["ZADD", far, &log_member],
            minute,
        ),
        (
            Rule::sliding_window("sw", Quota::per_hour(5), 60),
            vec!["HSET", &seconds, "3"],
            61 * minute,
        ),
        (
            Rule::token_bucket("tb", Quota::per_second(2).with_burst(4)),
            vec!["HSET", "t", far, "k", "0"],
            2_000_000,
        ),
        (
            Rule::gcra("g", Quota::per_second(2).with_burst(4)),
            vec!["SET", &gcra_level],
            2_000_000,
        ),
    ];
    for (rule, plant, longest) in cases {
        let name = rule.name().to_owned();
        let policy = Policy::try_from(rule).unwrap();
        let key = store.state_keys(&client, &policy).remove(0);
        let mut command = plant.clone();
        command.insert(1, &key);
        redis.cli(&command);

        let decision = store.check(&client, &policy, 2).await.unwrap();
        assert_eq!(
            (decision.outcome(), decision.used()),
            (Outcome::Allowed, 2),
            "{name}: the planted state counts as none"
        );
        let reset = u64::try_from(decision.full_after().as_micros()).unwrap();
        // The window algorithms start now: a whole period; 2 of a burst of 4 at 2 per second
        // drain in 1 s; the sliding window's sub-interval started up to a minute ago.
        let expected = match name.as_str() {
            "fw" | "log" => minute..=minute,
            "sw" => 60 * minute + 1..=61 * minute,
            _ => 1_000_000..=1_000_000,
        };
        assert!(expected.contains(&reset), "{name}: reset after {reset} µs");
        let ttl_ms = redis.pttl(&key);
        assert!(
            0 < ttl_ms && u64::try_from(ttl_ms).unwrap() * 1_000 <= longest,
            "{name}: PTTL {ttl_ms} ms"
        );
        // Nothing of the planted state is left.
        let left = match name.as_str() {
            "fw" => redis.cli(&["HGET", &key, "s"]) == far,
            "log" => !redis.cli(&["ZSCORE", &key, &log_member]).is_empty(),
            "sw" => redis.cli(&["HEXISTS", &key, &seconds]) == "1",
            "tb" => redis.cli(&["HGET", &key, "t"]) == far,
            _ => redis.cli(&["GET", &key]).starts_with(far),
        };
        assert!(!left, "{name}: the planted state is still in {key}");
    }
}
