//! Redis Sentinel for one test: a primary, its replica and three sentinels watching them, on free
//! ports, torn down with their processes and directories.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::cli;
use crate::tls::ServerTls;
use crate::{RedisServer, TempDir, find_binary, free_port};

/// The name the sentinels know the primary by.
pub const MASTER: &str = "limits";

/// The passwords of a set: none by default.
#[derive(Clone, Debug, Default)]
pub struct Passwords {
    /// The primary's and the replica's (`requirepass`, and `masterauth` to replicate); the
    /// sentinels are told it (`sentinel auth-pass`) to watch them.
    pub servers: Option<String>,
    /// The sentinels' own (`requirepass` in sentinel mode, which they also use among
    /// themselves), in [`urls`](RedisSentinels::urls).
    pub sentinels: Option<String>,
}

/// Two [`RedisServer`]s, a primary and its replica, and three sentinels watching them.
#[derive(Debug)]
pub struct RedisSentinels {
    /// The first primary and its replica; after a failover, the other is the primary.
    servers: [RedisServer; 2],
    sentinels: Vec<SentinelProcess>,
    /// The sentinels' own password.
    sentinel_password: Option<String>,
    /// TLS alone, on the servers and the sentinels, replication and monitoring too.
    tls: Option<ServerTls>,
    /// The sentinels' config files, which they rewrite, and their working directory: held for
    /// its removal on drop.
    _dir: TempDir,
}

#[derive(Debug)]
struct SentinelProcess {
    child: Child,
    port: u16,
}

impl RedisSentinels {
    /// A primary, a replica in sync with it, and three sentinels that all know both and each
    /// other.
    pub fn start() -> Self {
        Self::start_with(&Passwords::default())
    }

    /// [`start`](Self::start), the servers and the sentinels asking for `passwords`.
    pub fn start_with(passwords: &Passwords) -> Self {
        Self::start_set(passwords, None)
    }

    /// [`start`](Self::start), the servers and the sentinels speaking TLS alone as `tls` says,
    /// replication and the sentinels' connections too (`tls-replication yes`): the
    /// [`urls`](Self::urls) are `rediss://`.
    pub fn start_tls(tls: &ServerTls) -> Self {
        Self::start_set(&Passwords::default(), Some(tls.clone()))
    }

    fn start_set(passwords: &Passwords, tls: Option<ServerTls>) -> Self {
        let dir = TempDir::new("sentinel").expect("a directory for the sentinels' config files");
        let auth: Vec<&str> = match &passwords.servers {
            Some(password) => vec!["--requirepass", password, "--masterauth", password],
            None => Vec::new(),
        };
        let server = |args: &[&str]| {
            RedisServer::try_start_tls_on(args, free_port, tls.clone())
                .unwrap_or_else(|err| panic!("{err}"))
        };
        let primary = server(&auth);
        let primary_port = primary.port().to_string();
        let mut replica_args = vec!["--replicaof", "127.0.0.1", &primary_port];
        replica_args.extend(&auth);
        let replica = server(&replica_args);
        let sentinels = (0..3)
            .map(|index| start_sentinel(dir.path(), index, primary.port(), passwords, tls.as_ref()))
            .collect();
        let set = RedisSentinels {
            servers: [primary, replica],
            sentinels,
            sentinel_password: passwords.sentinels.clone(),
            tls,
            _dir: dir,
        };
        set.wait(
            Duration::from_secs(30),
            "the sentinels to know the replica and each other",
            |set| {
                set.sentinels.iter().all(|sentinel| {
                    let master = set.sentinel_cli(sentinel.port, &["SENTINEL", "MASTER", MASTER]);
                    master.contains("num-slaves\n1") && master.contains("num-other-sentinels\n2")
                }) && set.servers[1]
                    .cli(&["INFO", "replication"])
                    .contains("master_link_status:up")
            },
        );
        set
    }

    /// The sentinels' URLs, as `REDIS_SENTINEL_URLS` takes them: comma-separated.
    pub fn sentinel_urls(&self) -> String {
        self.urls().join(",")
    }

    /// The sentinels' URLs, as `RedisStore::sentinel` takes them: with the sentinels' own
    /// password, when they have one.
    pub fn urls(&self) -> Vec<String> {
        let auth = match &self.sentinel_password {
            Some(password) => format!(":{password}@"),
            None => String::new(),
        };
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        self.sentinels
            .iter()
            .map(|sentinel| format!("{scheme}://{auth}127.0.0.1:{}", sentinel.port))
            .collect()
    }

    fn sentinel_cli(&self, port: u16, args: &[&str]) -> String {
        cli(
            port,
            self.sentinel_password.as_deref(),
            self.tls.as_ref(),
            args,
        )
    }

    /// The port of the server the sentinels name as primary.
    pub fn primary_port(&self) -> u16 {
        let address = self.sentinel_cli(
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
    pub fn primary(&mut self) -> &mut RedisServer {
        let port = self.primary_port();
        self.servers
            .iter_mut()
            .find(|server| server.port() == port)
            .expect("the primary is one of the two servers")
    }

    /// The two servers: the first primary, then its replica.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// Asks the sentinels for a failover (`SENTINEL FAILOVER`) and waits until the replica is the
    /// primary and the old primary its replica (until then, the old one still takes writes,
    /// which its demotion discards: Sentinel's own window of lost writes).
    pub fn failover(&self) {
        let before = self.primary_port();
        let answer = self.sentinel_cli(self.sentinels[0].port, &["SENTINEL", "FAILOVER", MASTER]);
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
    pub fn kill_primary(&mut self) {
        let before = self.primary_port();
        self.primary().kill();
        self.wait(
            Duration::from_secs(30),
            "the sentinels to promote the replica",
            |set| set.primary_port() != before,
        );
    }

    /// Starts every server that is not running again (empty, as after a crash) as a replica of
    /// the primary, and waits until it is in sync: a set whose primary was killed gets back the
    /// replica a failover needs.
    pub fn revive(&mut self) {
        let primary = self.primary_port().to_string();
        for server in &mut self.servers {
            if !server.is_running() {
                server.restart();
                server.cli(&["REPLICAOF", "127.0.0.1", &primary]);
            }
        }
        self.wait(
            Duration::from_secs(30),
            "the revived replica to sync",
            |set| {
                set.servers.iter().all(|server| {
                    let role = server.cli(&["INFO", "replication"]);
                    role.contains("role:master") || role.contains("master_link_status:up")
                })
            },
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
        // The servers and the directory go after the sentinels, as fields drop.
        for sentinel in &mut self.sentinels {
            let _ = sentinel.child.kill();
            let _ = sentinel.child.wait();
        }
    }
}

fn start_sentinel(
    dir: &std::path::Path,
    index: usize,
    primary_port: u16,
    passwords: &Passwords,
    tls: Option<&ServerTls>,
) -> SentinelProcess {
    // `auth-pass` after `monitor`, which it refers to.
    let mut auth = String::new();
    if let Some(password) = &passwords.servers {
        auth.push_str(&format!("sentinel auth-pass {MASTER} {password}\n"));
    }
    if let Some(password) = &passwords.sentinels {
        auth.push_str(&format!("requirepass {password}\n"));
    }
    for _ in 0..20 {
        let port = free_port();
        // Sentinel rewrites its config file, so each has its own.
        let config = dir.join(format!("sentinel-{index}-{port}.conf"));
        let listen = match tls {
            Some(tls) => tls.config_file(port),
            None => format!("port {port}\n"),
        };
        std::fs::write(
            &config,
            format!(
                "{listen}bind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 5000\n\
                 sentinel parallel-syncs {MASTER} 1\n{auth}",
                dir = dir.display()
            ),
        )
        .expect("a sentinel config file");
        let binary = find_binary("redis-server").unwrap_or_else(|err| panic!("{err}"));
        let mut child = Command::new(binary)
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
            if crate::server::answers_ping(port, tls) {
                return SentinelProcess { child, port };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("could not start a sentinel on a free port after 20 attempts");
}
