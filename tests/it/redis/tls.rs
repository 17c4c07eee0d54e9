//! The Redis store over TLS (`rediss://`) against servers that speak TLS alone (`--port 0
//! --tls-port`), with certificates of a CA the test makes: one server, a Cluster (nodes
//! announcing their TLS ports, `--tls-cluster yes`) and Sentinel (sentinels and the primary they
//! name over TLS, across a failover too), the reset listener's subscription over TLS on each.
//! The server is always verified: a CA it does not know is refused; a server
//! that requires a client certificate serves the store that presents one, and refuses the store
//! without.

use std::sync::Arc;
use std::time::Duration;

use testkit::tls::{ClientAuth, ServerTls, TestCa};
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::{RedisStoreBuilder, RedisTls};
use tower_redis_ratelimit::{ConfigError, Policy, Quota, RedisStore, Rule, Store};

use crate::support::{RedisServer, eventually};

/// A fixed window of ten minutes: no window ends during a test.
fn policy(limit: u32) -> Policy {
    Policy::try_from(Rule::fixed_window(
        "api",
        Quota::new(limit, Duration::from_secs(600)),
    ))
    .unwrap()
}

fn server_tls(auth: ClientAuth) -> ServerTls {
    ServerTls::new(Arc::new(TestCa::new()), auth)
}

/// The test CA as the store's CA, and its client certificate.
fn store_tls(ca: &TestCa) -> RedisTls {
    RedisTls::new()
        .ca(TestCa::read(&ca.ca()))
        .client_certificate(
            TestCa::read(&ca.client_certificate()),
            TestCa::read(&ca.client_key()),
        )
}

/// Three requests of a limit of two: two admitted, counted 1 and 2, the third refused.
async fn limits(store: &RedisStore) {
    let policy = policy(2);
    let key = Key::from("client");
    for used in 1..=2 {
        let decision = store.check(&key, &policy, 1).await.unwrap();
        assert!(decision.is_allowed());
        assert_eq!(decision.used(), used);
    }
    assert!(!store.check(&key, &policy, 1).await.unwrap().is_allowed());
}

/// Waits until one reset listener is subscribed over `servers` (TLS servers: its pub/sub
/// connection speaks TLS too).
async fn subscribed(servers: &[&RedisServer]) {
    let subscribers = || {
        servers
            .iter()
            .map(|server| {
                let numsub = server.cli(&["PUBSUB", "NUMSUB", "ratelimit:reset"]);
                numsub
                    .lines()
                    .nth(1)
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0)
            })
            .sum::<usize>()
    };
    eventually(
        Duration::from_secs(10),
        "the listener subscribed",
        || async { subscribers() == 1 },
    )
    .await;
}

/// Builds the store of `builder` and asks it once: its error, as the caller sees it.
async fn refused(builder: RedisStoreBuilder) -> String {
    let store = builder
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let error = store
        .check(&Key::from("client"), &policy(10), 1)
        .await
        .unwrap_err();
    error.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_decides_over_tls_with_the_servers_ca() {
    let tls = server_tls(ClientAuth::Optional);
    let server = RedisServer::start_tls(&tls, &[]);
    assert!(server.url().starts_with("rediss://127.0.0.1:"));
    let store = RedisStore::builder(&server.url())
        .tls(RedisTls::new().ca(TestCa::read(&tls.ca().ca())))
        .build()
        .unwrap();
    assert_eq!(store.redacted_url(), server.url());
    limits(&store).await;
    // The count is the server's: another instance over TLS sees it.
    let other = RedisStore::builder(&server.url())
        .tls(store_tls(tls.ca()))
        .denial_cache(0)
        .build()
        .unwrap();
    let decision = other
        .check(&Key::from("client"), &policy(2), 0)
        .await
        .unwrap();
    assert_eq!(decision.used(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_of_a_ca_the_store_does_not_know_is_refused() {
    let tls = server_tls(ClientAuth::Optional);
    let server = RedisServer::start_tls(&tls, &[]);
    // Another CA than the server's; and no CA at all (Mozilla's roots): both refused, and
    // nothing is counted.
    let stranger = TestCa::new();
    let error = refused(
        RedisStore::builder(&server.url()).tls(RedisTls::new().ca(TestCa::read(&stranger.ca()))),
    )
    .await;
    // The stranger's CA has the test CA's name: the signature gives it away.
    assert!(
        error.ends_with("invalid peer certificate: BadSignature"),
        "{error}"
    );
    let error = refused(RedisStore::builder(&server.url())).await;
    assert!(
        error.ends_with("invalid peer certificate: UnknownIssuer"),
        "{error}"
    );
    assert!(server.keys().is_empty(), "{:?}", server.keys());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_requires_a_client_certificate_serves_the_store_that_presents_one() {
    let tls = server_tls(ClientAuth::Required);
    let server = RedisServer::start_tls(&tls, &[]);
    let store = RedisStore::builder(&server.url())
        .tls(store_tls(tls.ca()))
        .build()
        .unwrap();
    limits(&store).await;
    // Without a client certificate, the server ends the handshake: an error, no decision.
    let without = RedisTls::new().ca(TestCa::read(&tls.ca().ca()));
    let error = refused(RedisStore::builder(&server.url()).tls(without)).await;
    assert!(
        error.ends_with("received fatal alert: CertificateRequired"),
        "{error}"
    );
    assert_eq!(
        server.keys().len(),
        1,
        "only the first store's key: {:?}",
        server.keys()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_reaches_another_instance_over_tls() {
    let tls = server_tls(ClientAuth::Required);
    let server = RedisServer::start_tls(&tls, &[]);
    let instance = || {
        RedisStore::builder(&server.url())
            .tls(store_tls(tls.ca()))
            .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(100))
            .build()
            .unwrap()
    };
    let (banned, resetting) = (instance(), instance());
    let policy = policy(1);
    let key = Key::from("abuser");
    // The first decision starts the listener: its subscription is a connection of its own,
    // over TLS as the decisions' (the server takes nothing else).
    assert!(banned.check(&key, &policy, 1).await.unwrap().is_allowed());
    eventually(
        Duration::from_secs(10),
        "the listener subscribed",
        || async {
            server
                .cli(&["PUBSUB", "NUMSUB", "ratelimit:reset"])
                .ends_with('1')
        },
    )
    .await;
    assert!(!banned.check(&key, &policy, 1).await.unwrap().is_allowed());
    // Remembered: the keys deleted by hand do not lift the ban; a reset does, heard over TLS.
    for state in banned.state_keys(&key, &policy) {
        server.cli(&["DEL", &state]);
    }
    assert!(!banned.check(&key, &policy, 1).await.unwrap().is_allowed());
    resetting.reset(&key, &policy).await.unwrap();
    eventually(Duration::from_secs(10), "the ban lifted", || async {
        banned.check(&key, &policy, 1).await.unwrap().is_allowed()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_that_do_not_fit_are_refused_at_build() {
    let ca = TestCa::new();
    let error = |result: Result<RedisStore, ConfigError>| result.unwrap_err().to_string();
    assert_eq!(
        error(
            RedisStore::builder("rediss://127.0.0.1:6380")
                .tls(RedisTls::new().ca("not a certificate"))
                .build()
        ),
        "invalid store configuration: invalid TLS ca: no PEM certificate in it"
    );
    assert_eq!(
        error(
            RedisStore::builder("rediss://127.0.0.1:6380")
                .tls(RedisTls::new().client_certificate(
                    TestCa::read(&ca.client_certificate()),
                    TestCa::read(&ca.client_certificate()),
                ))
                .build()
        ),
        "invalid store configuration: invalid TLS private_key: no PEM private key in it: \
         no items found"
    );
    assert_eq!(
        error(
            RedisStore::builder("redis://app:s3cret@127.0.0.1:6379")
                .tls(store_tls(&ca))
                .build()
        ),
        "invalid store configuration: TLS certificates are given for \
         redis://app:***@127.0.0.1:6379, which is not a TLS address: write rediss:// to \
         connect with TLS"
    );
    // With certificates, redis-rs asks every sentinel with one user name and password.
    assert_eq!(
        error(
            RedisStore::sentinel(
                [
                    "rediss://:one@127.0.0.1:26379",
                    "rediss://:two@127.0.0.1:26380"
                ],
                "limits"
            )
            .tls(store_tls(&ca))
            .build()
        ),
        "invalid store configuration: invalid Redis Sentinel settings: with TLS certificates \
         every sentinel is asked with one user name and password: give every sentinel URL the \
         same"
    );
    assert_eq!(
        error(RedisStore::builder("rediss://127.0.0.1:6380/#insecure").build()),
        "invalid store configuration: rediss://127.0.0.1:6380/#insecure asks for TLS without \
         verifying the server (#insecure), which this crate never does: give the CA that \
         signed the server's certificate instead (`tls.ca`)"
    );
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_decides_over_tls_on_a_cluster() {
    let tls = server_tls(ClientAuth::Required);
    let cluster = crate::support::cluster::RedisCluster::start_tls(&tls);
    let urls = cluster.urls();
    assert!(urls.iter().all(|url| url.starts_with("rediss://")));
    // One node given: the others are found, and reached over TLS at the ports they announce.
    let store = RedisStore::cluster(&urls[..1])
        .tls(store_tls(tls.ca()))
        .build()
        .unwrap();
    limits(&store).await;
    // Clients on the slots of every primary.
    let policy = policy(100);
    for client in 0..30 {
        let key = Key::from(format!("client-{client}").as_str());
        assert_eq!(store.check(&key, &policy, 1).await.unwrap().used(), 1);
    }
    let primaries_with_keys = cluster
        .primaries()
        .into_iter()
        .filter(|&index| !cluster.node(index).keys().is_empty())
        .count();
    assert_eq!(primaries_with_keys, 3);
    // The reset listener subscribed on a node, over TLS.
    let nodes: Vec<&RedisServer> = (0..6).map(|index| cluster.node(index)).collect();
    subscribed(&nodes).await;
}

#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_decides_over_tls_on_the_primary_sentinels_name() {
    let tls = server_tls(ClientAuth::Required);
    let sentinels = crate::support::sentinel::RedisSentinels::start_tls(&tls);
    let urls = sentinels.urls();
    assert!(urls.iter().all(|url| url.starts_with("rediss://")));
    let store = RedisStore::sentinel(&urls, crate::support::sentinel::MASTER)
        .tls(store_tls(tls.ca()))
        .build()
        .unwrap();
    limits(&store).await;
    let primary = sentinels.primary_port();
    let server = sentinels
        .servers()
        .iter()
        .find(|server| server.port() == primary)
        .unwrap();
    assert_eq!(server.keys().len(), 1, "{:?}", server.keys());
    // The reset listener subscribed on the primary, over TLS.
    subscribed(&[server]).await;
    // After a failover the store finds the promoted replica, over TLS too.
    sentinels.failover();
    assert_ne!(sentinels.primary_port(), primary);
    let policy = policy(10);
    eventually(
        Duration::from_secs(20),
        "a decision on the promoted replica",
        || async {
            let decision = store.check(&Key::from("after"), &policy, 1).await;
            decision.is_ok_and(|decision| decision.is_allowed())
        },
    )
    .await;
    // Without the store's CA the sentinels themselves are refused.
    let error = refused(RedisStore::sentinel(
        &urls,
        crate::support::sentinel::MASTER,
    ))
    .await;
    assert!(
        error.ends_with("invalid peer certificate: UnknownIssuer"),
        "{error}"
    );
}
