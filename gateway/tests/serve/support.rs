//! The upstream, the `serve` process, the gateways in front of both as docs/gateways.md
//! configures them, and clients whose requests cannot hang a test.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::Router;
use axum::routing::any;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use testkit::TempDir;
use testkit::nginx::Nginx;
use testkit::peer::Peer;

pub(crate) use crate::process::BINARY;
use crate::process::{GatewayProcess, Output};

/// docs/gateways.md, where the tests read each gateway's configuration.
pub(crate) const GUIDE: &str = include_str!("../../../docs/gateways.md");

/// The upstream: answers every request with the path and query it was asked for, the request
/// id it was given in `x-seen-request-id`, and the rate-limit headers its request carried
/// (Traefik and Caddy add them to the request) in `x-seen-ratelimit` and
/// `x-seen-ratelimit-policy`.
pub(crate) async fn upstream() -> SocketAddr {
    let app = Router::new().fallback(any(|uri: http::Uri, headers: http::HeaderMap| async move {
        let id = headers.get("x-request-id").cloned();
        let id = id.unwrap_or(http::HeaderValue::from_static("-"));
        let mut seen = http::HeaderMap::new();
        seen.insert("x-seen-request-id", id);
        for (name, as_seen) in [
            ("ratelimit", "x-seen-ratelimit"),
            ("ratelimit-policy", "x-seen-ratelimit-policy"),
        ] {
            if let Some(value) = headers.get(name) {
                seen.insert(as_seen, value.clone());
            }
        }
        (seen, format!("path {uri}"))
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

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
}

/// The nginx configuration of docs/gateways.md, pointed at `upstream` and at `serve` (an
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

/// nginx as docs/gateways.md configures it, in front of `upstream`, asking `serve`.
pub(crate) fn nginx(upstream: SocketAddr, serve: &str) -> Nginx {
    Nginx::start(1, &documented_nginx(upstream, serve)).unwrap()
}

/// A client whose requests leave from `from` (a loopback address: each one is a client of its
/// own) and fail after 30 s: a service that never answers fails its test instead of hanging
/// the suite.
pub(crate) fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .local_address(from.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// GET `url` from `from` with `headers`.
pub(crate) async fn get(from: &str, url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client_from(from).get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A header of `response`, as text ("-" when absent).
pub(crate) fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map_or("-".to_owned(), |value| value.to_str().unwrap().to_owned())
}

/// The gateways of docs/gateways.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Nginx,
    Traefik,
    Caddy,
}

impl Kind {
    /// This gateway as docs/gateways.md configures it, in front of `upstream`, asking `serve`
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

/// An answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    /// A header, as text ("-" when absent).
    pub(crate) fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map_or("-".to_owned(), |value| value.to_str().unwrap().to_owned())
    }
}

/// GET `target` on `to` from `from` (a loopback address: each one is a client of its own)
/// with `headers`, over HTTP/1.1 on a connection of its own. The target goes out exactly as
/// written: reqwest, like browsers, would resolve `/./api/x` and `/static/../api/x` itself.
/// Fails after 30 s: a gateway that never answers fails its test instead of hanging it.
pub(crate) async fn raw_get(
    from: &str,
    to: SocketAddr,
    target: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let asked = async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::new(from.parse().unwrap(), 0))
            .unwrap();
        let stream = socket.connect(to).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut request = http::Request::get(target).header(http::header::HOST, to.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let (parts, body) = sender.send_request(request).await.unwrap().into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    };
    tokio::time::timeout(Duration::from_secs(30), asked)
        .await
        .unwrap_or_else(|_| panic!("no answer to GET {target} within 30 s"))
}
