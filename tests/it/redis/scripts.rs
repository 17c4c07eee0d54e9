//! What the decision script does to Redis: it survives `SCRIPT FLUSH` (NOSCRIPT is answered by
//! loading the script again), every key it writes carries a TTL, a request that is not admitted
//! (denied, never admissible, or a cost-0 peek) writes nothing at all, and state found far ahead
//! of the server's clock is replaced rather than honoured.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use http::request::Parts;
use tower_redis_ratelimit::key::{HeaderKey, Key};
use tower_redis_ratelimit::{Outcome, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};

use crate::support::{RedisServer, get as send, header};

const PEER: &str = "192.0.2.9:6000";
/// Long, so that these tests check what Redis holds, never a timeout on a busy machine.
const DEADLINE: Duration = Duration::from_secs(2);

/// The request cost: the `x-cost` header, or 1.
fn cost(parts: &Parts) -> u32 {
    parts
        .headers
        .get("x-cost")
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

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
    info_field(redis, "persistence", "rdb_changes_since_last_save")
}

fn cached_scripts(redis: &RedisServer) -> u64 {
    info_field(redis, "memory", "number_of_cached_scripts")
}

fn info_field(redis: &RedisServer, section: &str, field: &str) -> u64 {
    let info = redis.cli(&["INFO", section]);
    info.lines()
        .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
        .parse()
        .unwrap()
}

/// After `SCRIPT FLUSH` the next EVALSHA gets NOSCRIPT; `redis::Script` loads the script again
/// and retries, so decisions go on, counting from where they were: at the start, in the middle,
/// right before a denial, and under concurrency (every concurrent caller hits NOSCRIPT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_continue_after_script_flush() {
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    let layer = layer(
        &store,
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
        assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]), "OK");
        assert_eq!(cached_scripts(&redis), 0);
    };

    counted(1).await;
    assert_eq!(cached_scripts(&redis), 1);
    flush();
    counted(2).await;
    assert_eq!(cached_scripts(&redis), 1, "the script was loaded again");
    counted(3).await;
    counted(4).await;
    flush();
    counted(5).await;
    flush();
    let response = send(&app, "/", PEER, &[("x-client", "alice")]).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&response, "rate-limiting-state"), "Deny");
    assert_eq!(redis.cli(&["HGET", "ratelimit:fw:fw-1h:{alice}", "n"]), "5");

    // Twenty concurrent callers all meet NOSCRIPT; the quota of 5 still holds exactly.
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

/// After a mix of allowed, denied, never-admissible and cost-0 requests from several clients on
/// a fixed window, a GCRA rule and a two-rule policy, exactly the expected keys exist and every
/// one has a TTL, positive and no longer than its rule's period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_written_key_has_a_ttl() {
    let redis = RedisServer::start();
    let app = app(&redis);
    let clients = ["alice", "bob", "carol"];
    for client in clients {
        for uri in ["/fw", "/gcra", "/multi"] {
            // Over every quota: some allowed, then denied.
            for _ in 0..4 {
                let (status, state) = request(&app, uri, client, 1).await;
                assert!(
                    matches!(
                        (status.as_u16(), state.as_str()),
                        (200, "Allow") | (429, "Deny")
                    ),
                    "{uri} {client}: {status} {state:?}"
                );
            }
            // A peek, and a request that can never fit.
            assert_eq!(request(&app, uri, client, 0).await.0, StatusCode::OK);
            assert_eq!(
                request(&app, uri, client, 100).await.0,
                StatusCode::TOO_MANY_REQUESTS
            );
        }
    }
    // Clients that only ever peeked or asked for too much have no state at all.
    for uri in ["/fw", "/gcra", "/multi"] {
        assert_eq!(request(&app, uri, "peeker", 0).await.0, StatusCode::OK);
        assert_eq!(
            request(&app, uri, "greedy", 100).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
    }

    let keys: BTreeSet<String> = redis.keys().into_iter().collect();
    let expected: BTreeSet<String> = clients
        .iter()
        .flat_map(|client| {
            ["fw:fw-1h", "g:gcra-2/1m", "m-fw:fw-1h", "m-g:gcra-2/1h"]
                .map(|rule| format!("ratelimit:{rule}:{{{client}}}"))
        })
        .collect();
    assert_eq!(keys, expected);
    for key in &keys {
        let ttl = redis.pttl(key);
        assert!(
            ttl > 0 && ttl <= period_ms(key),
            "{key} has PTTL {ttl} (period {} ms)",
            period_ms(key)
        );
    }
}

/// A denied request leaves Redis untouched: not one write (the server's change counter does not
/// move), every stored value and TTL as it was. In a two-rule policy, the rule that would have
/// admitted the request is not counted either (all or nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_request_writes_nothing() {
    let redis = RedisServer::start();
    let app = app(&redis);

    for _ in 0..3 {
        assert_eq!(request(&app, "/fw", "dave", 1).await.1, "Allow");
    }
    for _ in 0..2 {
        assert_eq!(request(&app, "/gcra", "dave", 1).await.1, "Allow");
        assert_eq!(request(&app, "/multi", "dave", 1).await.1, "Allow");
    }
    let fw = "ratelimit:fw:fw-1h:{dave}";
    let gcra = "ratelimit:g:gcra-2/1m:{dave}";
    let multi_fw = "ratelimit:m-fw:fw-1h:{dave}";
    let multi_gcra = "ratelimit:m-g:gcra-2/1h:{dave}";
    let snapshot = |redis: &RedisServer| {
        (
            redis.cli(&["HGETALL", fw]),
            redis.cli(&["GET", gcra]),
            redis.cli(&["HGETALL", multi_fw]),
            redis.cli(&["GET", multi_gcra]),
        )
    };
    let before = snapshot(&redis);
    assert!(before.0.ends_with("n\n3"), "{fw}: {:?}", before.0);
    assert!(before.2.ends_with("n\n2"), "{multi_fw}: {:?}", before.2);
    assert!(!before.1.is_empty() && !before.3.is_empty());
    let ttls_before: Vec<i64> = [fw, gcra, multi_fw, multi_gcra]
        .iter()
        .map(|key| redis.pttl(key))
        .collect();
    let writes_before = writes(&redis);

    // Denied on every route; on /multi the fixed window alone would still admit 3 more.
    for _ in 0..3 {
        for uri in ["/fw", "/gcra", "/multi"] {
            let (status, state) = request(&app, uri, "dave", 1).await;
            assert_eq!(
                (status, state.as_str()),
                (StatusCode::TOO_MANY_REQUESTS, "Deny")
            );
        }
    }
    // Never admissible, on a client with state and on a fresh one; and cost-0 peeks.
    for uri in ["/fw", "/gcra", "/multi"] {
        for client in ["dave", "newcomer"] {
            assert_eq!(
                request(&app, uri, client, 100).await.0,
                StatusCode::TOO_MANY_REQUESTS
            );
            assert_eq!(request(&app, uri, client, 0).await.0, StatusCode::OK);
        }
    }

    assert_eq!(
        writes(&redis),
        writes_before,
        "a denied request wrote to Redis"
    );
    assert_eq!(snapshot(&redis), before);
    for (key, before) in [fw, gcra, multi_fw, multi_gcra].iter().zip(ttls_before) {
        let after = redis.pttl(key);
        assert!(
            0 < after && after <= before,
            "{key}: PTTL {before} before the denials, {after} after"
        );
    }
    assert!(
        redis.keys().iter().all(|key| !key.contains("newcomer")),
        "{:?}",
        redis.keys()
    );

    // And the counter does move when a request is admitted (the check above can fail).
    assert_eq!(request(&app, "/fw", "erin", 1).await.1, "Allow");
    assert!(writes(&redis) > writes_before);
}

/// The sliding log, sliding window and token bucket, with the server's clock: after allowed,
/// denied, never-admissible and cost-0 requests from several clients, exactly the expected keys
/// exist, each with a TTL that is positive and no longer than its state can matter (the log's
/// period; the window's period plus one sub-interval; the time the bucket takes to refill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_sets_a_ttl_no_longer_than_its_state_matters() {
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    let ok = || async { "ok" };
    let app = Router::new()
        .route(
            "/log",
            get(ok).layer(layer(
                &store,
                vec![Rule::sliding_log("log", Quota::per_hour(3))],
            )),
        )
        .route(
            "/sw",
            get(ok).layer(layer(
                &store,
                vec![Rule::sliding_window("sw", Quota::per_hour(3), 4)],
            )),
        )
        .route(
            "/tb",
            get(ok).layer(layer(
                &store,
                vec![Rule::token_bucket("tb", Quota::per_minute(2))],
            )),
        );
    let routes = ["/log", "/sw", "/tb"];
    let clients = ["alice", "bob"];
    for client in clients {
        for uri in routes {
            for _ in 0..4 {
                let (status, state) = request(&app, uri, client, 1).await;
                assert!(
                    matches!(
                        (status.as_u16(), state.as_str()),
                        (200, "Allow") | (429, "Deny")
                    ),
                    "{uri} {client}: {status} {state:?}"
                );
            }
            assert_eq!(request(&app, uri, client, 0).await.0, StatusCode::OK);
            assert_eq!(
                request(&app, uri, client, 100).await.0,
                StatusCode::TOO_MANY_REQUESTS
            );
            // Only peeks and requests that can never pass: no state.
            assert_eq!(request(&app, uri, "peeker", 0).await.0, StatusCode::OK);
            assert_eq!(
                request(&app, uri, "greedy", 100).await.0,
                StatusCode::TOO_MANY_REQUESTS
            );
        }
    }

    let keys: BTreeSet<String> = redis.keys().into_iter().collect();
    let expected: BTreeSet<String> = clients
        .iter()
        .flat_map(|client| {
            ["log:log-1h", "sw:sw4-1h", "tb:tb2-2/1m"]
                .map(|rule| format!("ratelimit:{rule}:{{{client}}}"))
        })
        .collect();
    assert_eq!(keys, expected);
    for key in &keys {
        let longest = match key.split(':').nth(1) {
            Some("log") => 3_600_000,
            Some("sw") => 3_600_000 + 900_000,
            Some("tb") => 60_000,
            _ => panic!("unexpected key {key:?}"),
        };
        let ttl = redis.pttl(key);
        assert!(
            ttl > 0 && ttl <= longest,
            "{key} has PTTL {ttl} (at most {longest} ms)"
        );
    }
    // The log holds one entry per admitted unit, never more than its limit.
    assert_eq!(redis.cli(&["ZCARD", "ratelimit:log:log-1h:{alice}"]), "3");
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
        let reset = u64::try_from(decision.reset_after().as_micros()).unwrap();
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
