//! Redis Functions: the store's code is one library (`FUNCTION LOAD`, then `FCALL`) on Redis 7+,
//! loaded again wherever it is missing (a restart without persistence, another version of it
//! beside), kept by replicas across a Sentinel or a Cluster failover with no reload, and scripts
//! (`EVALSHA`) where the server has no `FCALL` (as Redis 6.2) or the user may not load functions.

use std::time::Duration;

use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Policy, Quota, RedisStore, Rule, Store};

use crate::support::{RedisServer, eventually};

fn policy() -> Policy {
    Policy::try_from(Rule::gcra("api", Quota::per_hour(1_000))).unwrap()
}

/// Decides a request for `key`: whether Redis answered (and admitted it).
async fn decided(store: &RedisStore, key: &str) -> bool {
    store
        .check(&Key::from(key), &policy(), 1)
        .await
        .is_ok_and(|decision| decision.is_allowed())
}

/// How many times `server` ran `command` (`fcall`, `evalsha`, `function|load`...).
fn ran(server: &RedisServer, command: &str) -> u64 {
    server.command_calls().get(command).copied().unwrap_or(0)
}

/// The names of the function libraries `server` holds.
fn libraries(server: &RedisServer) -> Vec<String> {
    let listed = server.cli(&["FUNCTION", "LIST"]);
    let mut lines = listed.lines();
    let mut names = Vec::new();
    while let Some(line) = lines.next() {
        if line.trim() == "library_name" {
            names.extend(lines.next().map(|name| name.trim().to_owned()));
        }
    }
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_without_persistence_gets_the_library_again() {
    let mut server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(100))
        .build()
        .unwrap();
    assert!(decided(&store, "a").await);
    let loaded = libraries(&server);
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert!(loaded[0].starts_with("ratelimit_"), "{loaded:?}");
    assert_eq!(ran(&server, "function|load"), 1);

    server.restart();
    assert!(
        libraries(&server).is_empty(),
        "no persistence: the library is gone"
    );
    eventually(Duration::from_secs(10), "decisions again", || async {
        decided(&store, "b").await
    })
    .await;
    assert_eq!(libraries(&server), loaded);
    assert_eq!(
        ran(&server, "function|load"),
        1,
        "loaded once on the new server"
    );
    assert!(ran(&server, "fcall") >= 1);
    assert_eq!(ran(&server, "evalsha"), 0);
}

/// Instances of two releases during a rolling upgrade: each calls its own version of the
/// library, and loading this one leaves the other in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_version_of_the_library_stays_beside_this_one() {
    let server = RedisServer::start();
    let older = "#!lua name=ratelimit_0000000000000000\n\
                 redis.register_function('ratelimit_0000000000000000_decide', \
                 function(keys, args) return 'older' end)";
    assert_eq!(
        server.cli(&["FUNCTION", "LOAD", older]),
        "ratelimit_0000000000000000"
    );
    let store = RedisStore::open(&server.url()).unwrap();
    assert!(decided(&store, "a").await);
    let loaded = libraries(&server);
    assert_eq!(loaded.len(), 2, "{loaded:?}");
    assert_eq!(loaded[0], "ratelimit_0000000000000000");
    assert_eq!(
        server.cli(&["FCALL", "ratelimit_0000000000000000_decide", "0"]),
        "older"
    );
}

/// A server without `FCALL` (renamed away here, absent from Redis 6.2): the store sends
/// scripts, and every decision is exact all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_fcall_is_sent_scripts() {
    let server = RedisServer::start_with(&["--rename-command", "FCALL", ""]);
    let store = RedisStore::open(&server.url()).unwrap();
    let policy = Policy::try_from(Rule::fixed_window("api", Quota::per_hour(3))).unwrap();
    let key = Key::from("client");
    for used in 1..=3 {
        let decision = store.check(&key, &policy, 1).await.unwrap();
        assert_eq!((decision.is_allowed(), decision.used()), (true, used));
    }
    assert!(!store.check(&key, &policy, 1).await.unwrap().is_allowed());
    assert!(ran(&server, "evalsha") >= 4);
    assert_eq!(ran(&server, "function|load"), 0);
}

/// A user whose ACL does not allow `FUNCTION LOAD` (but allows scripts) gets scripts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_not_allowed_to_load_functions_is_sent_scripts() {
    let server = RedisServer::start();
    let created = server.cli(&[
        "ACL",
        "SETUSER",
        "limiter",
        "on",
        ">s3cret",
        "~*",
        "&*",
        "+@all",
        "-function",
    ]);
    assert_eq!(created, "OK");
    let url = format!("redis://limiter:s3cret@127.0.0.1:{}", server.port());
    let store = RedisStore::open(&url).unwrap();
    assert!(decided(&store, "a").await);
    assert!(decided(&store, "b").await);
    assert!(ran(&server, "evalsha") >= 2);
    assert!(libraries(&server).is_empty());
}

#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_needs_no_reload() {
    use crate::support::sentinel::{MASTER, RedisSentinels};

    let mut sentinels = RedisSentinels::start();
    let urls = sentinels.urls();
    let store = RedisStore::sentinel(&urls, MASTER)
        .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
        .build()
        .unwrap();
    assert!(decided(&store, "a").await);
    assert_eq!(ran(sentinels.primary(), "function|load"), 1);
    // The replica receives the library by replication (which its own count shows); promoted,
    // it serves the calls as they are, with no load of the store's.
    for server in sentinels.servers() {
        eventually(
            Duration::from_secs(10),
            "the library on the replica",
            || async { ran(server, "function|load") == 1 },
        )
        .await;
    }
    let loads: Vec<(u16, u64)> = sentinels
        .servers()
        .iter()
        .map(|server| (server.port(), ran(server, "function|load")))
        .collect();
    sentinels.failover();
    eventually(
        Duration::from_secs(20),
        "decisions on the new primary",
        || async { decided(&store, "b").await },
    )
    .await;
    let primary = sentinels.primary();
    assert!(ran(primary, "fcall") >= 1);
    let before = loads
        .iter()
        .find(|(port, _)| *port == primary.port())
        .map(|(_, loads)| *loads);
    assert_eq!(
        Some(ran(primary, "function|load")),
        before,
        "no load since the failover"
    );
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_failover_needs_no_reload() {
    use crate::support::cluster::RedisCluster;

    let mut cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls()).build().unwrap();
    assert!(decided(&store, "victim").await);
    // The library went to every primary at once, and reaches each replica by replication.
    for node in 0..6 {
        let what = format!("the library on node {node}");
        eventually(Duration::from_secs(10), &what, || async {
            ran(cluster.node(node), "function|load") == 1
        })
        .await;
    }
    let loads: Vec<u64> = (0..6)
        .map(|node| ran(cluster.node(node), "function|load"))
        .collect();
    let killed = cluster.primary_for("{victim}");
    cluster.kill(killed);
    eventually(
        Duration::from_secs(30),
        "decisions on the promoted replica",
        || async { decided(&store, "victim").await },
    )
    .await;
    let promoted = cluster.primary_for("{victim}");
    assert_ne!(promoted, killed);
    assert!(ran(cluster.node(promoted), "fcall") >= 1);
    // It had the library by replication (its count shows it), and got no load since.
    assert_eq!(
        ran(cluster.node(promoted), "function|load"),
        loads[promoted],
        "no load since the failover"
    );
}

/// The library remembers the numbers its calls' arguments spell (`arg_number` in
/// `lua/common.lua`), up to 1,024 distinct ones, then starts again: a store that has sent many
/// more (here 3,000 rules of distinct limits, each with its own integers) still decides every
/// request exactly, before, across and after each new start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_numbers_it_remembers_the_library_still_decides_exactly() {
    let server = RedisServer::start();
    let store = RedisStore::open(&server.url()).unwrap();
    let tight = Policy::try_from(Rule::fixed_window("tight", Quota::per_hour(2))).unwrap();
    for round in 0..3u32 {
        for limit in 0..1_000u32 {
            let limit = 10_000 + round * 1_000 + limit;
            let policy = Policy::try_from(Rule::fixed_window(
                format!("r{limit}"),
                Quota::per_hour(limit),
            ))
            .unwrap();
            let decision = store
                .check(&Key::from(format!("k{limit}")), &policy, 1)
                .await
                .unwrap();
            assert!(decision.is_allowed());
            assert_eq!(decision.remaining(), u64::from(limit - 1), "limit {limit}");
        }
        // Two of the tight rule's per hour are admitted, on a key of its own each round.
        let key = Key::from(format!("tight-{round}"));
        for admitted in [true, true, false] {
            let decision = store.check(&key, &tight, 1).await.unwrap();
            assert_eq!(decision.is_allowed(), admitted, "round {round}");
        }
    }
    assert!(ran(&server, "fcall") >= 3_009);
}
