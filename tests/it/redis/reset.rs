//! Resets across instances: a reset deletes a client's state in Redis and reaches what every
//! instance remembers of it (denials, quota leases), on one server, a cluster and Sentinel;
//! an instance that missed a reset (its subscription broke) forgets everything it remembered.
//! Several `RedisStore` values on one private server are several instances.

use std::time::Duration;

use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::QuotaLeases;
use tower_redis_ratelimit::{Decision, Policy, Quota, RedisStore, Rule, Store};

use crate::support::{RedisServer, eventually};

/// Long enough for a listener to subscribe again, or to hear a message, on a busy machine.
const HEARD: Duration = Duration::from_secs(10);

/// Fixed windows of ten minutes: no window ends during a test, so only a reset gives quota back.
fn policy(name: &str, limit: u32) -> Policy {
    Policy::try_from(Rule::fixed_window(
        name,
        Quota::new(limit, Duration::from_secs(600)),
    ))
    .unwrap()
}

fn instance(url: &str) -> RedisStore {
    RedisStore::builder(url)
        .prefix("reset")
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(100))
        .build()
        .unwrap()
}

async fn check(store: &RedisStore, key: &str, policy: &Policy) -> Decision {
    store.check(&Key::from(key), policy, 1).await.unwrap()
}

/// Starts the listener of every instance (it starts with the first decision) and waits until
/// all `instances` are subscribed, counted over `servers`: a listener's first subscription
/// forgets whatever its instance remembered before it.
async fn listening(instances: &[RedisStore], servers: &[&RedisServer]) {
    for store in instances {
        let _ = store
            .check(&Key::from("start"), &policy("start", 1), 0)
            .await;
    }
    let subscribers = || {
        servers
            .iter()
            .map(|server| {
                let numsub = server.cli(&["PUBSUB", "NUMSUB", "reset:reset"]);
                numsub
                    .lines()
                    .nth(1)
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0)
            })
            .sum::<usize>()
    };
    eventually(HEARD, "every instance subscribed to resets", || async {
        subscribers() == instances.len()
    })
    .await;
}

/// Asks every instance until it is denied `key` (its denial cache then remembers it).
async fn ban(instances: &[RedisStore], key: &str, policy: &Policy) {
    for store in instances {
        while check(store, key, policy).await.is_allowed() {}
    }
}

/// Waits until every instance admits `key` once (a request answered from a remembered denial
/// counts nothing); fails after [`HEARD`].
async fn lifted_everywhere(instances: &[RedisStore], key: &str, policy: &Policy) {
    for (index, store) in instances.iter().enumerate() {
        // A call may fail while a store follows a failover: not yet.
        eventually(HEARD, &format!("instance {index} admits {key}"), || async {
            let decision = store.check(&Key::from(key), policy, 1).await;
            decision.is_ok_and(|decision| decision.is_allowed())
        })
        .await;
    }
}

/// What Redis counts for `key`: a cost-0 check, which always asks Redis.
async fn used(store: &RedisStore, key: &str, policy: &Policy) -> u64 {
    store
        .check(&Key::from(key), policy, 0)
        .await
        .unwrap()
        .used()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_lifts_a_ban_on_every_instance_where_deleting_the_keys_by_hand_does_not() {
    let server = RedisServer::start();
    let instances: Vec<RedisStore> = (0..3).map(|_| instance(&server.url())).collect();
    listening(&instances, &[&server]).await;
    let policy = policy("api", 5);
    ban(&instances, "abuser", &policy).await;

    // The operator deletes the client's keys: every instance still refuses it, from what it
    // remembers, until the remembered wait (ten minutes) ends.
    let key = Key::from("abuser");
    for state in instances[0].state_keys(&key, &policy) {
        server.cli(&["DEL", &state]);
    }
    for store in &instances {
        assert!(!check(store, "abuser", &policy).await.is_allowed());
    }
    assert_eq!(used(&instances[0], "abuser", &policy).await, 0, "deleted");

    // A reset from one instance reaches all three: each admits the client again, and Redis
    // counts exactly those three admissions.
    instances[1].reset(&key, &policy).await.unwrap();
    lifted_everywhere(&instances, "abuser", &policy).await;
    assert_eq!(used(&instances[0], "abuser", &policy).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_drops_the_quota_leases_it_covers_so_the_fresh_quota_is_never_exceeded() {
    let server = RedisServer::start();
    let exact = instance(&server.url());
    let leased = RedisStore::builder(&server.url())
        .prefix("reset")
        .quota_leases(
            QuotaLeases::default()
                .lifetime(Duration::from_secs(60))
                .max_share(0.5),
        )
        .build()
        .unwrap();
    listening(&[exact.clone(), leased.clone()], &[&server]).await;
    let hot = policy("hot", 10);
    // Eight quick requests through the leasing instance: it reserves slices as the key proves
    // hot, and ends holding units of the last one (the quota of 10 all taken in Redis, the
    // last slice asked in the background: it lands a moment after the eighth answer).
    for _ in 0..8 {
        assert!(check(&leased, "client", &hot).await.is_allowed());
    }
    eventually(HEARD, "the rest leased", || async {
        used(&exact, "client", &hot).await == 10
    })
    .await;
    assert!(!check(&exact, "client", &hot).await.is_allowed());
    // A second key whose denial the leasing instance remembers: when it admits that key again,
    // it has heard this reset and the one before it (messages arrive in order).
    let marker = policy("marker", 1);
    ban(std::slice::from_ref(&leased), "marker", &marker).await;

    exact.reset(&Key::from("client"), &hot).await.unwrap();
    exact.reset(&Key::from("marker"), &marker).await.unwrap();
    lifted_everywhere(std::slice::from_ref(&leased), "marker", &marker).await;

    // The fresh quota is 10, wherever the requests go: the units leased before the reset were
    // taken from the state it deleted, and are not spent on top of it.
    let mut admitted = 0;
    for _ in 0..20 {
        for store in [&exact, &leased] {
            if check(store, "client", &hot).await.is_allowed() {
                admitted += 1;
            }
        }
    }
    assert!(admitted <= 10, "{admitted} admitted of a fresh quota of 10");
    // Units the leasing instance holds now, unspent, are the only ones missing.
    leased.return_leases().await.unwrap();
    assert_eq!(used(&exact, "client", &hot).await, admitted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_lost_its_subscription_forgets_what_it_remembered() {
    let server = RedisServer::start();
    let store = instance(&server.url());
    listening(std::slice::from_ref(&store), &[&server]).await;
    let policy = policy("api", 2);
    ban(std::slice::from_ref(&store), "abuser", &policy).await;
    // The keys are deleted by hand, and no reset is published: the instance cannot know. Then
    // its subscription breaks (so it may have missed a reset): once it subscribes again, it
    // forgets every denial it remembered, and asks Redis.
    for state in store.state_keys(&Key::from("abuser"), &policy) {
        server.cli(&["DEL", &state]);
    }
    assert!(!check(&store, "abuser", &policy).await.is_allowed());
    assert_eq!(server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]), "1");
    lifted_everywhere(std::slice::from_ref(&store), "abuser", &policy).await;
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_reaches_every_instance_on_a_cluster() {
    let cluster = crate::support::cluster::RedisCluster::start();
    let instance = || {
        RedisStore::cluster(cluster.urls())
            .prefix("reset")
            .build()
            .unwrap()
    };
    let instances = [instance(), instance()];
    let nodes: Vec<&RedisServer> = (0..6).map(|index| cluster.node(index)).collect();
    listening(&instances, &nodes).await;
    let policy = policy("api", 5);
    // Keys on slots of different primaries: the reset's PUBLISH runs on the key's primary, and
    // the listeners subscribe on the first node; the cluster bus carries it between them.
    let keys = ["a", "b", "c", "d", "e", "f"];
    for key in keys {
        ban(&instances, key, &policy).await;
    }
    for key in keys {
        instances[0].reset(&Key::from(key), &policy).await.unwrap();
    }
    for key in keys {
        lifted_everywhere(&instances, key, &policy).await;
    }
}

#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_reaches_every_instance_across_a_sentinel_failover() {
    use crate::support::sentinel::{MASTER, RedisSentinels};

    let sentinels = RedisSentinels::start();
    let urls = sentinels.urls();
    let instance = || {
        RedisStore::sentinel(&urls, MASTER)
            .prefix("reset")
            .reconnect_backoff(Duration::from_millis(50), Duration::from_millis(200))
            .build()
            .unwrap()
    };
    let instances = [instance(), instance()];
    let servers: Vec<&RedisServer> = sentinels.servers().iter().collect();
    listening(&instances, &servers).await;
    let policy = policy("api", 5);
    ban(&instances, "abuser", &policy).await;
    // The listeners subscribed on the old primary; after the failover it is a replica, or they
    // subscribed again on the new one: either way the reset, made on the new primary, reaches
    // them.
    sentinels.failover();
    let key = Key::from("abuser");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while instances[0].reset(&key, &policy).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reset on the new primary within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lifted_everywhere(&instances, "abuser", &policy).await;
}
