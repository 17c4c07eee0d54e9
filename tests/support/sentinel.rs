//! Redis Sentinel for one test: a primary, its replica and three sentinels watching them, on free
//! ports, torn down with their processes and directory.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{RedisServer, find_binary, free_port};

/// The name the sentinels know the primary by.
pub(crate) const MASTER: &str = "limits";

pub(crate) struct RedisSentinels {
    /// The first primary and its replica; after a failover, the other is the primary.
    servers: [RedisServer; 2],
    sentinels: Vec<SentinelProcess>,
    dir: PathBuf,
}

struct SentinelProcess {
    child: Child,
    port: u16,
}

impl RedisSentinels {
    /// A primary, a replica in sync with it, and three sentinels that all know both and each
    /// other.
    pub(crate) fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "trr-sentinel-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).expect("a directory for the sentinels' config files");
        let primary = RedisServer::start();
        let replica = RedisServer::start_with(
            vec![
                "--replicaof".into(),
                "127.0.0.1".into(),
                primary.port().to_string(),
            ],
            None,
            free_port,
        );
        let sentinels = (0..3)
            .map(|index| start_sentinel(&dir, index, primary.port()))
            .collect();
        let set = RedisSentinels {
            servers: [primary, replica],
            sentinels,
            dir,
        };
        set.wait(
            Duration::from_secs(30),
            "the sentinels to know the replica and each other",
            |set| {
                set.sentinels.iter().all(|sentinel| {
                    let master = sentinel_cli(sentinel.port, &["SENTINEL", "MASTER", MASTER]);
                    master.contains("num-slaves\n1") && master.contains("num-other-sentinels\n2")
                }) && set.servers[1]
                    .cli(&["INFO", "replication"])
                    .contains("master_link_status:up")
            },
        );
        set
    }

    /// The sentinels' URLs, as `REDIS_SENTINEL_URLS` takes them: comma-separated.
    pub(crate) fn sentinel_urls(&self) -> String {
        self.sentinels
            .iter()
            .map(|sentinel| format!("redis://127.0.0.1:{}", sentinel.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The port of the server the sentinels name as primary.
    pub(crate) fn primary_port(&self) -> u16 {
        let address = sentinel_cli(
            self.sentinels[0].port,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER],
        );
        address
            .lines()
            .nth(1)
            .and_then(|port| port.trim().parse().ok())
            .unwrap_or_else(|| panic!("no primary address from the sentinel: {address:?}"))
    }

    /// The server that is primary now.
    pub(crate) fn primary(&mut self) -> &mut RedisServer {
        let port = self.primary_port();
        self.servers
            .iter_mut()
            .find(|server| server.port() == port)
            .expect("the primary is one of the two servers")
    }

    /// Asks the sentinels for a failover (`SENTINEL FAILOVER`) and waits until the replica is the
    /// primary and the old primary its replica (until then, the old one still takes writes,
    /// which its demotion discards: Sentinel's own window of lost writes).
    pub(crate) fn failover(&self) {
        let before = self.primary_port();
        let answer = sentinel_cli(self.sentinels[0].port, &["SENTINEL", "FAILOVER", MASTER]);
        assert_eq!(answer, "OK", "SENTINEL FAILOVER refused");
        self.wait(Duration::from_secs(30), "the failover", |set| {
            let now = set.primary_port();
            let role = |port: u16| {
                set.servers
                    .iter()
                    .find(|server| server.port() == port)
                    .map(|server| server.cli(&["ROLE"]))
                    .unwrap_or_default()
            };
            now != before && role(now).starts_with("master") && role(before).starts_with("slave")
        });
    }

    /// Kills the primary (SIGKILL) and waits until the sentinels promoted the replica.
    pub(crate) fn kill_primary(&mut self) {
        let before = self.primary_port();
        self.primary().kill();
        self.wait(
            Duration::from_secs(30),
            "the sentinels to promote the replica",
            |set| set.primary_port() != before,
        );
    }

    fn wait(&self, within: Duration, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + within;
        while !done(self) {
            assert!(Instant::now() < deadline, "waited {within:?} for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        for sentinel in &mut self.sentinels {
            let _ = sentinel.child.kill();
            let _ = sentinel.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_sentinel(dir: &std::path::Path, index: usize, primary_port: u16) -> SentinelProcess {
    for _ in 0..20 {
        let port = free_port();
        // Sentinel rewrites its config file, so each has its own.
        let config = dir.join(format!("sentinel-{index}-{port}.conf"));
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 5000\n\
                 sentinel parallel-syncs {MASTER} 1\n",
                dir = dir.display()
            ),
        )
        .expect("a sentinel config file");
        let mut child = Command::new(find_binary("redis-server"))
            .arg(&config)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server --sentinel runs");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if sentinel_cli(port, &["PING"]) == "PONG" {
                return SentinelProcess { child, port };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("could not start a sentinel on a free port after 20 attempts");
}

fn sentinel_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new(find_binary("redis-cli"))
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
