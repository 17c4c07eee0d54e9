//! The `serve` process and nginx in front of it as docs/gateways.md configures it; the upstream
//! and the clients are [`crate::web`]'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use testkit::TempDir;
use testkit::nginx::Nginx;

pub(crate) use crate::process::BINARY;
use crate::process::{GatewayProcess, Output};
pub(crate) use crate::web::{client_from, get, header, upstream};

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

    /// `serve`, and its standard output after the first line.
    pub(crate) fn start_with_stdout(config: &str) -> (Self, Output) {
        let dir = TempDir::new("serve").unwrap();
        let config_text = config.replace("{dir}", &dir.path().display().to_string());
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, config_text).unwrap();
        let (process, line, stdout) = GatewayProcess::start("serve", &path, Stdio::null());
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

    /// The path `{dir}` stands for in its file.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn signal(&self, signal: &str) {
        self.process.signal(signal);
    }
}

/// The nginx configuration of docs/gateways.md, pointed at `upstream` and at `serve` (an
/// address, or `unix:/path`), listening on the test's port.
pub(crate) fn documented_nginx(upstream: SocketAddr, serve: &str) -> String {
    testkit::nginx::documented(
        include_str!("../../../docs/gateways.md"),
        &[
            ("server 127.0.0.1:3000;", format!("server {upstream};")),
            ("server 127.0.0.1:8081;", format!("server {serve};")),
            ("listen 8080;", "listen 127.0.0.1:{port};".to_owned()),
        ],
    )
    .unwrap()
}

/// nginx as docs/gateways.md configures it, in front of `upstream`, asking `serve`.
pub(crate) fn nginx(upstream: SocketAddr, serve: &str) -> Nginx {
    Nginx::start(1, &documented_nginx(upstream, serve)).unwrap()
}
