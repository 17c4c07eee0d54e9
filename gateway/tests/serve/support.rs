//! The `serve` process and the gateways in front of it as gateway/docs/gateways.md configures them; the
//! upstream and the clients are [`crate::web`]'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use testkit::TempDir;
use testkit::nginx::Nginx;
use testkit::peer::Peer;

pub(crate) use crate::process::BINARY;
use crate::process::{GatewayProcess, Output};
pub(crate) use crate::web::{Answer, client_from, get, header, raw_get, upstream};

/// gateway/docs/gateways.md, where the tests read each gateway's configuration.
pub(crate) const GUIDE: &str = include_str!("../../docs/gateways.md");

/// A policy `api` of `limit` requests a minute, and the route of `/api/` keyed by the client's
/// address: the limits of most tests, after their `[serve]` table.
pub(crate) fn limits(limit: u32) -> String {
    format!(
        r#"
        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = {limit}, period = "1min" }}]

        [routes.api]
        paths = ["/api/"]
        policy = "api"
        key = {{ client_ip = {{}} }}
        "#
    )
}

/// `serve` on TCP with `limits`, trusting the gateways' address (127.0.0.1) only: the tests'
/// clients, on other loopback addresses, are clients of their own.
pub(crate) fn behind_gateways(limits: &str) -> String {
    format!(
        r#"
        [serve]
        listen = "127.0.0.1:0"
        gateways = ["127.0.0.1"]
        access_log = "off"
        {limits}
        "#
    )
}

/// A running `serve` and its configuration file.
pub(crate) struct Serve {
    pub(crate) process: GatewayProcess,
    /// Its TCP address, if it has one.
    pub(crate) addr: Option<String>,
    pub(crate) config: PathBuf,
    /// Where its files (the configuration, a socket) are.
    pub(crate) dir: TempDir,
}

impl Serve {
    /// `serve` of the file `config`, in which `{dir}` is replaced by a directory of its own (for
    /// a socket); standard output (the access log) is dropped.
    pub(crate) fn start(config: &str) -> Self {
        Self::start_with_stdout(config).0
    }

    /// `serve`, and its standard output (the access log).
    pub(crate) fn start_with_stdout(config: &str) -> (Self, Output) {
        Self::start_in(TempDir::new("serve").unwrap(), config)
    }

    /// `serve` of `config` written in `dir` (where its relative paths start), and its
    /// standard output.
    pub(crate) fn start_in(dir: TempDir, config: &str) -> (Self, Output) {
        let config_text = config.replace("{dir}", &dir.path().display().to_string());
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, config_text).unwrap();
        let (process, line, stdout) = GatewayProcess::start("serve", &path, None);
        let listeners = line
            .strip_prefix("serve: listening on ")
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let addr = listeners
            .split(" and ")
            .find_map(|listener| {
                listener
                    .strip_prefix("http://")
                    .or_else(|| listener.strip_prefix("https://"))
            })
            .map(str::to_owned);
        let serve = Serve {
            process,
            addr,
            config: path,
            dir,
        };
        (serve, stdout)
    }

    /// The URL of `path` on its TCP address.
    pub(crate) fn url(&self, path: &str) -> String {
        format!(
            "http://{}{path}",
            self.addr.as_ref().expect("a TCP listener")
        )
    }

    /// Its Unix socket, where a file of `socket = "{dir}/serve.sock"` puts it.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir().join("serve.sock")
    }

    /// The path `{dir}` stands for in its file.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn signal(&self, signal: &str) {
        self.process.signal(signal);
    }

    /// Its next message (on standard error) that contains `text`, the ones before it skipped.
    pub(crate) fn message_containing(&self, text: &str) -> String {
        self.process.message_containing(text)
    }
}

/// The nginx configuration of gateway/docs/gateways.md, pointed at `upstream` and at `serve` (an
/// address, or `unix:/path`), listening on the test's port.
pub(crate) fn documented_nginx(upstream: SocketAddr, serve: &str) -> String {
    testkit::nginx::documented(
        GUIDE,
        &[
            ("server 127.0.0.1:3000;", format!("server {upstream};")),
            ("server 127.0.0.1:8081;", format!("server {serve};")),
            ("listen 8080;", "listen 127.0.0.1:{port};".to_owned()),
        ],
    )
    .unwrap()
}

/// nginx as gateway/docs/gateways.md configures it, in front of `upstream`, asking `serve`.
pub(crate) fn nginx(upstream: SocketAddr, serve: &str) -> Nginx {
    Nginx::start(1, &documented_nginx(upstream, serve)).unwrap()
}

/// The gateways of gateway/docs/gateways.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Nginx,
    Traefik,
    Caddy,
}

impl Kind {
    /// This gateway as gateway/docs/gateways.md configures it, in front of `upstream`, asking `serve`
    /// on its TCP address, or on its Unix socket when it has none.
    pub(crate) async fn start(self, upstream: SocketAddr, serve: &Serve) -> Gateway {
        match self {
            Kind::Nginx => {
                let asks = match &serve.addr {
                    Some(addr) => addr.clone(),
                    None => format!("unix:{}", serve.socket().display()),
                };
                let nginx = nginx(upstream, &asks);
                let addr = nginx.addr();
                Gateway {
                    addr,
                    passes: Passes::ToClient,
                    process: Process::Nginx(nginx),
                }
            }
            Kind::Traefik => crate::traefik::start(upstream, serve).await,
            Kind::Caddy => crate::caddy::start(upstream, serve),
        }
    }
}

/// Where a gateway's documented block puts an admitted request's `RateLimit` and
/// `RateLimit-Policy`: nginx's `add_header` on the client's answer; Traefik's
/// `authResponseHeaders` and Caddy's `copy_headers` on the request to the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Passes {
    ToClient,
    ToService,
}

/// A gateway's process, stopped when dropped.
#[derive(Debug)]
pub(crate) enum Process {
    /// nginx, from the system's packages.
    Nginx(Nginx),
    /// Traefik or Caddy, where `.ci/install-gateways` puts them.
    Peer(Peer),
}

/// A running gateway, in front of the upstream, asking `serve`.
#[derive(Debug)]
pub(crate) struct Gateway {
    /// Where its clients connect.
    pub(crate) addr: SocketAddr,
    pub(crate) passes: Passes,
    pub(crate) process: Process,
}

impl Gateway {
    /// What it logged so far (nginx: its error log).
    pub(crate) fn log(&self) -> String {
        match &self.process {
            Process::Nginx(nginx) => nginx.error_log(),
            Process::Peer(peer) => peer.log(),
        }
    }

    /// GET `target` from `from` with `headers`, the target sent exactly as written.
    pub(crate) async fn get(&self, from: &str, target: &str, headers: &[(&str, &str)]) -> Answer {
        raw_get(from, self.addr, target, headers).await
    }

    /// The `RateLimit` and `RateLimit-Policy` of an admitted request, where its block puts
    /// them ("-" when absent).
    pub(crate) fn limit_headers(&self, answer: &Answer) -> (String, String) {
        match self.passes {
            Passes::ToClient => (
                answer.header("ratelimit"),
                answer.header("ratelimit-policy"),
            ),
            Passes::ToService => (
                answer.header("x-seen-ratelimit"),
                answer.header("x-seen-ratelimit-policy"),
            ),
        }
    }
}
