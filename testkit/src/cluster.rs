//! A real Redis Cluster for one test: three primaries and a replica each, on free ports, started
//! with `redis-server --cluster-enabled yes` and joined with `redis-cli --cluster create`, torn
//! down with its processes (SIGKILL by PID) and their directories; or, for a benchmark, any
//! number of primaries without replicas, joined slot range by slot range.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::tls::ServerTls;
use crate::{RedisServer, TempDir, find_binary};

/// How long a primary may be unreachable before its replica takes over: short, so failover tests
/// take seconds.
const NODE_TIMEOUT_MS: u64 = 1_000;

/// Six [`RedisServer`]s joined into a cluster, each in a directory of its own (where it keeps its
/// `nodes.conf`, across a restart too).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// TLS alone, on every node and on the cluster bus.
    tls: Option<ServerTls>,
}

impl RedisCluster {
    /// Three primaries with one replica each, every slot served, every replica in sync.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// [`start`](Self::start), every node speaking TLS alone as `tls` says, the cluster bus and
    /// replication too (`--tls-cluster yes`): the nodes announce their TLS ports, and the
    /// [`urls`](Self::urls) are `rediss://`.
    pub fn start_tls(tls: &ServerTls) -> Self {
        Self::start_with(Some(tls.clone()))
    }

    fn start_with(tls: Option<ServerTls>) -> Self {
        let node_timeout = NODE_TIMEOUT_MS.to_string();
        let mut arguments = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            &node_timeout,
        ];
        if tls.is_some() {
            arguments.extend(["--tls-cluster", "yes"]);
        }
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::try_start_tls_on(&arguments, cluster_port, tls.clone())
                    .unwrap_or_else(|err| panic!("{err}"))
            })
            .collect();
        let cluster = RedisCluster { nodes, tls };
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = cluster
            .redis_cli()
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli runs");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        cluster.wait_until_ready(Duration::from_secs(30));
        cluster
    }

    /// `count` primaries (1 or more) and no replicas, the slots shared evenly between them
    /// (`CLUSTER ADDSLOTSRANGE`, then `CLUSTER MEET`): one primary too, which
    /// `redis-cli --cluster create` refuses (it wants three). For a benchmark of how a load
    /// spreads over primaries: no replica takes a core from them.
    pub fn start_primaries(count: usize) -> Self {
        assert!(count >= 1, "a cluster has at least one primary");
        let node_timeout = NODE_TIMEOUT_MS.to_string();
        let arguments = [
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            &node_timeout,
        ];
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| {
                RedisServer::try_start_tls_on(&arguments, cluster_port, None)
                    .unwrap_or_else(|err| panic!("{err}"))
            })
            .collect();
        let cluster = RedisCluster { nodes, tls: None };
        let slots = 16_384;
        let first = cluster.nodes[0].port().to_string();
        for (index, node) in cluster.nodes.iter().enumerate() {
            let start = slots * index / count;
            let end = slots * (index + 1) / count - 1;
            let added = node.cli(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &start.to_string(),
                &end.to_string(),
            ]);
            assert_eq!(added, "OK", "CLUSTER ADDSLOTSRANGE {start} {end}");
            if index > 0 {
                let met = node.cli(&["CLUSTER", "MEET", "127.0.0.1", &first]);
                assert_eq!(met, "OK", "CLUSTER MEET");
            }
        }
        cluster.wait_until_ready(Duration::from_secs(30));
        cluster
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The URLs as `REDIS_CLUSTER_URLS` takes them: comma-separated.
    pub fn urls_joined(&self) -> String {
        self.urls().join(",")
    }

    /// The node at `index` (0 to 5).
    pub fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
    }

    /// The indexes of the running primaries.
    pub fn primaries(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&index| self.nodes[index].is_running())
            .filter(|&index| self.nodes[index].cli(&["ROLE"]).starts_with("master"))
            .collect()
    }

    /// `key`'s slot, as the cluster computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        self.any_live()
            .cli(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("a slot number")
    }

    /// The running primary serving `key`'s slot.
    pub fn primary_for(&self, key: &str) -> usize {
        let slot = self.keyslot(key);
        self.primaries()
            .into_iter()
            .find(|&index| self.owns_slot(index, slot))
            .expect("a primary for every slot")
    }

    /// Kills node `index` (SIGKILL): its replica takes over after the node timeout.
    pub fn kill(&mut self, index: usize) {
        self.nodes[index].kill();
    }

    /// Starts node `index` again with its nodes.conf: it rejoins the cluster (as a replica of
    /// whoever took its slots over).
    pub fn restart(&mut self, index: usize) {
        self.nodes[index].restart();
    }

    /// Waits until every running node sees the cluster as ok, every slot served, and every running
    /// replica in sync with its primary.
    pub fn wait_until_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.is_ready() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster was not ready within {within:?}: {}",
                self.any_live().cli(&["CLUSTER", "INFO"])
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Moves `slots` slots from the primary at `from` to the primary at `to`
    /// (`redis-cli --cluster reshard`), keys included, while clients keep running.
    pub fn reshard(&self, from: usize, to: usize, slots: u32) {
        // Its output (a line per slot moved) goes to a file: a pipe nobody reads while it runs
        // would fill and stall it.
        let dir = TempDir::new("reshard").expect("a directory for redis-cli's log");
        let log = dir.path().join("reshard.log");
        let file = std::fs::File::create(&log).expect("a log file for redis-cli");
        let mut child = self
            .redis_cli()
            .args(["--cluster", "reshard"])
            .arg(format!("127.0.0.1:{}", self.nodes[to].port()))
            .args(["--cluster-from", &self.node_id(from)])
            .args(["--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("the log file, twice"))
            .stderr(file)
            .spawn()
            .expect("redis-cli runs");
        // A few seconds on an idle machine; a stuck migration fails the test instead of hanging
        // the suite.
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.try_wait().expect("redis-cli's status") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        match status {
            Some(status) => assert!(
                status.success(),
                "redis-cli --cluster reshard failed: {output}"
            ),
            None => panic!("redis-cli --cluster reshard still running after 120 s: {output}"),
        }
    }

    /// How many slots the node at `index` serves.
    pub fn slot_count(&self, index: usize) -> u32 {
        self.slot_ranges(index)
            .iter()
            .map(|(start, end)| u32::from(end - start) + 1)
            .sum()
    }

    fn is_ready(&self) -> bool {
        let live: Vec<&RedisServer> = self.nodes.iter().filter(|node| node.is_running()).collect();
        let ok = live.iter().all(|node| {
            let info = node.cli(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
        });
        ok && live.iter().all(|node| {
            let replication = node.cli(&["INFO", "replication"]);
            replication.contains("role:master") || replication.contains("master_link_status:up")
        })
    }

    /// `redis-cli`, over TLS for a TLS cluster.
    fn redis_cli(&self) -> Command {
        let mut command = Command::new(redis_cli());
        if let Some(tls) = &self.tls {
            command.args(tls.cli_args());
        }
        command
    }

    fn any_live(&self) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| node.is_running())
            .expect("a running node")
    }

    fn node_id(&self, index: usize) -> String {
        self.nodes[index].cli(&["CLUSTER", "MYID"])
    }

    fn owns_slot(&self, index: usize, slot: u16) -> bool {
        self.slot_ranges(index)
            .iter()
            .any(|&(start, end)| (start..=end).contains(&slot))
    }

    /// The slot ranges the node at `index` serves, from its own `CLUSTER NODES` line.
    fn slot_ranges(&self, index: usize) -> Vec<(u16, u16)> {
        let nodes = self.nodes[index].cli(&["CLUSTER", "NODES"]);
        let Some(line) = nodes.lines().find(|line| line.contains("myself")) else {
            return Vec::new();
        };
        line.split_whitespace()
            .skip(8)
            .filter(|field| !field.starts_with('['))
            .filter_map(|field| match field.split_once('-') {
                Some((start, end)) => Some((start.parse().ok()?, end.parse().ok()?)),
                None => field.parse().ok().map(|slot| (slot, slot)),
            })
            .collect()
    }
}

/// A free port whose cluster bus port (the port + 10000) is free too, both below Linux's
/// ephemeral range (32768 and up by default): a node killed and restarted on its port must find
/// it free, and an outgoing connection may take an ephemeral port while the node is down.
fn cluster_port() -> u16 {
    loop {
        let port = fastrand::u16(20_000..22_768);
        let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(port) && free(port + 10_000) {
            return port;
        }
    }
}

fn redis_cli() -> std::path::PathBuf {
    find_binary("redis-cli").unwrap_or_else(|err| panic!("{err}"))
}

/// The cluster slot of a key whose hash tag is all of `tag` (CRC16/XMODEM modulo 16384, as Redis
/// computes it).
pub fn slot(tag: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in tag.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}
