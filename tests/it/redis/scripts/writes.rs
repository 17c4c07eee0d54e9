//! What the decision script writes: every key with a TTL, positive and no longer than its state
//! can matter, for every algorithm; and for a request that is not admitted, nothing at all.

use std::collections::BTreeSet;

use super::{app, layer, period_ms, request, writes};
use crate::support::RedisServer;
use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tower_redis_ratelimit::{Quota, RedisStore, Rule};

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
