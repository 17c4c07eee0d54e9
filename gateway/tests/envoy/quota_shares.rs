//! The quota service's shares kept in process and in Redis (`lua/shares.lua`) decide alike:
//! one scenario, in real time, against both stores; and Redis's keys live only as long as
//! their entries, one key per bucket on a Cluster's slots.

use std::time::{Duration, Instant};

use ratelimit_gateway::envoy::quota::share::Timing;
use ratelimit_gateway::envoy::quota::shares::{InProcessShares, RedisShares, Shares};
use testkit::RedisServer;
use testkit::cluster::RedisCluster;
use tower_redis_ratelimit::RedisStore;

const TIMING: Timing = Timing {
    ttl_ms: 400,
    grace_ms: 200,
    min_change_ms: 400,
};

const BUCKET: &str = r#"["edge",[["name","tenant"],["tenant","acme"]]]"#;

/// Two Envoys asking 200 of a limit of 100 (the first one given the whole limit), then one
/// leaving: each step at least 100 ms away
/// from the times it depends on. The shares each settle answered.
async fn scenario(shares: &dyn Shares) -> Vec<u64> {
    // Timed from the first answer: a first call may connect (to every node of a cluster).
    let mut seen = vec![
        shares
            .settle(BUCKET, "a", 200, 100, TIMING)
            .await
            .expect("settled"),
    ];
    let started = Instant::now();
    let at = |ms: u64| async move {
        let when = started + Duration::from_millis(ms);
        tokio::time::sleep_until(when.into()).await;
    };
    let mut settle = async |holder: &str| {
        let share = shares
            .settle(BUCKET, holder, 200, 100, TIMING)
            .await
            .expect("settled");
        seen.push(share);
    };
    at(50).await;
    settle("b").await; // nothing free
    at(450).await;
    settle("a").await; // lowered to half, its 100 held until 0 + 400 + 200
    at(500).await;
    settle("b").await; // still held
    at(700).await;
    settle("b").await; // free now: half
    at(750).await;
    shares.leave(BUCKET, "a", TIMING).await.expect("left");
    at(850).await;
    settle("b").await; // a's 50 held until 450 + 600, and b changed at 700
    at(1_150).await;
    settle("b").await; // the whole limit
    seen
}

const EXPECTED: [u64; 7] = [100, 0, 50, 0, 50, 50, 100];

#[tokio::test]
async fn in_process_and_redis_shares_decide_alike() {
    assert_eq!(scenario(&InProcessShares::new()).await, EXPECTED);
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    assert_eq!(scenario(&RedisShares::new(store)).await, EXPECTED);
    // One key per bucket, gone once its entries have expired.
    let keys = redis.keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(redis.pttl(&keys[0]) <= 600, "{}", redis.pttl(&keys[0]));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(redis.keys().is_empty(), "{:?}", redis.keys());
}

#[tokio::test]
async fn a_cluster_keeps_each_bucket_in_one_slot() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls()).build().unwrap();
    assert_eq!(scenario(&RedisShares::new(store)).await, EXPECTED);
}
