//! A ledger on a Redis Cluster of three primaries (`ledger = { nodes = [...] }`), declared from
//! the command line, three regions asking many keys at twice their quota: no key above its
//! quota in any window, each key granted, the keys' ledger windows on every primary.

use std::collections::BTreeSet;

use testkit::cluster::RedisCluster;

use super::world::{LedgerAt, Setup, World};
use crate::support::{keys_per_primary, toml_strings};

const KEYS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_on_a_cluster_holds_every_keys_quota_across_three_regions() {
    let cluster = RedisCluster::start();
    let world = World::start(Setup {
        quota: 10,
        keys: KEYS,
        ..Setup::new(LedgerAt::Direct(format!(
            "nodes = {}",
            toml_strings(&cluster.urls())
        )))
    })
    .await;
    let q = world.quota;
    // Each region asks every key at two thirds of its quota: twice the quota worldwide. The
    // ledger's keys are read while they live (a window's for two periods).
    let drive = world.drive(4.0, |_, _| (KEYS as u64 * 2 * q) as f64 / 3.0);
    let spread = async {
        world.sleep_until(3.5).await;
        tokio::task::block_in_place(|| keys_per_primary(&cluster, "api"))
    };
    let ((), spread) = tokio::join!(drive, spread);
    world.verdict("a ledger on a 3-primary Cluster", q);
    // Every window served at least 90 % of what it could be (each key's quota).
    for window in 1..4 {
        world.assert_served(window, &[0, 1, 2], q * KEYS as u64);
    }
    let granted: BTreeSet<String> = world
        .upstream
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|arrival| arrival.key.clone())
        .collect();
    assert_eq!(granted.len(), KEYS, "{granted:?}");

    // The keys' windows on the ledger: on every primary.
    eprintln!("keys per primary: {spread:?}");
    assert_eq!(spread.iter().sum::<usize>(), KEYS, "{spread:?}");
    assert!(spread.iter().all(|&keys| keys > 0), "{spread:?}");
}
