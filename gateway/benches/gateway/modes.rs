//! The modes: what stands between the load generator and the upstream. Adding one is a variant
//! of [`Mode`] (listed in `Mode::ALL`, named in `Mode::name`) and its arm in [`Target::start`].

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use testkit::nginx::Nginx;
use testkit::{BoxError, TempDir};

use crate::Settings;

/// What the load generator sends its requests to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The upstream itself: what the HTTP stack and the handler cost.
    Direct,
    /// nginx as a reverse proxy to the upstream: the reference.
    Nginx,
    /// `ratelimit-gateway proxy`, counts in process, every request admitted.
    ProxyMemory,
    /// `ratelimit-gateway proxy`, counts in Redis, every request admitted.
    ProxyRedis,
    /// `ratelimit-gateway proxy`, every request refused (429) by an exhausted global key.
    ProxyRefusing,
    // The place for `serve` (item 2 of the gateway issue): nginx with `auth_request` to
    // `ratelimit-gateway serve`, against nginx alone. Add `ServeAuthRequest` here, in ALL and
    // in `name`, and its arm in `Target::start` (an Nginx whose config has the auth_request
    // location, and a `serve` process).
}

impl Mode {
    /// Every mode, in the order of the report.
    pub(crate) const ALL: [Mode; 5] = [
        Mode::Direct,
        Mode::Nginx,
        Mode::ProxyMemory,
        Mode::ProxyRedis,
        Mode::ProxyRefusing,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Direct => "upstream directly",
            Mode::Nginx => "nginx reverse proxy",
            Mode::ProxyMemory => "proxy, in-process store",
            Mode::ProxyRedis => "proxy, Redis store",
            Mode::ProxyRefusing => "proxy, refusing everything",
        }
    }
}

/// A mode, running.
pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    /// What keeps it running: stopped when dropped.
    _running: Running,
}

/// Held for its `Drop`: nginx and the proxy stop with it.
enum Running {
    Nothing,
    Nginx { _nginx: Nginx },
    Proxy { _proxy: ProxyProcess },
}

impl Target {
    pub(crate) fn start(
        mode: Mode,
        settings: &Settings,
        upstream: SocketAddr,
        redis_url: &str,
    ) -> Result<Target, BoxError> {
        let proxy = |store: &str, policy: &str, key: &str| {
            ProxyProcess::start(&proxy_config(
                upstream,
                settings.workers,
                store,
                policy,
                key,
            ))
        };
        let gcra = r#"{ name = "bench", algorithm = "gcra", limit = 1000000, period = "1s", burst = 1000000 }"#;
        let (addr, running) = match mode {
            Mode::Direct => (upstream, Running::Nothing),
            Mode::Nginx => {
                let nginx = Nginx::start(settings.workers, &nginx_config(upstream))?;
                (nginx.addr(), Running::Nginx { _nginx: nginx })
            }
            Mode::ProxyMemory => {
                let proxy = proxy("", gcra, r#"{ header = "x-key" }"#)?;
                (proxy.addr, Running::Proxy { _proxy: proxy })
            }
            Mode::ProxyRedis => {
                let store = format!("[stores.redis]\ntype = \"redis\"\nurl = \"{redis_url}\"\n");
                let proxy = proxy(&store, gcra, r#"{ header = "x-key" }"#)?;
                (proxy.addr, Running::Proxy { _proxy: proxy })
            }
            Mode::ProxyRefusing => {
                let one_an_hour =
                    r#"{ name = "bench", algorithm = "fixed_window", limit = 1, period = "1h" }"#;
                let proxy = proxy("", one_an_hour, r#"{ global = "everyone" }"#)?;
                (proxy.addr, Running::Proxy { _proxy: proxy })
            }
        };
        Ok(Target {
            addr,
            _running: running,
        })
    }
}

/// nginx in front of the upstream as its guide configures a reverse proxy: HTTP/1.1 and a pool
/// of keep-alive connections upstream, no access log (the proxy's is off too). Connections,
/// the client's and the upstream's, are kept for as many requests as a run sends, as the
/// proxy keeps them (nginx's default closes them after 1,000 requests: the load generator's
/// connection would end mid-slice).
fn nginx_config(upstream: SocketAddr) -> String {
    format!(
        "upstream app {{ server {upstream}; keepalive 64; keepalive_requests 100000000; }}\n\
         server {{\n\
           listen 127.0.0.1:{{port}};\n\
           keepalive_requests 100000000;\n\
           location / {{\n\
             proxy_pass http://app;\n\
             proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\";\n\
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
           }}\n\
         }}"
    )
}

/// The proxy with as many workers as nginx has.
fn proxy_config(
    upstream: SocketAddr,
    workers: usize,
    store: &str,
    rule: &str,
    key: &str,
) -> String {
    format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\nupstream = \"http://{upstream}\"\naccess_log = \"off\"\n\
         connections = {{ workers = {workers} }}\n\n\
         {store}\n\
         [policies.bench]\nrules = [{rule}]\n\n\
         [routes.bench]\npaths = [\"/\"]\npolicy = \"bench\"\nkey = {key}\nfailure_mode = \"closed\"\n"
    )
}

/// A `ratelimit-gateway proxy` process, killed when dropped.
struct ProxyProcess {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl ProxyProcess {
    fn start(config: &str) -> Result<Self, BoxError> {
        let dir = TempDir::new("gateway-bench")?;
        let path = dir.path().join("proxy.toml");
        std::fs::write(&path, config)?;
        let mut child = Command::new(env!("CARGO_BIN_EXE_ratelimit-gateway"))
            .arg("proxy")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            BufReader::new(stdout).read_line(&mut line)?;
        }
        let addr = line
            .strip_prefix("proxy: listening on http://")
            .and_then(|rest| rest.split(',').next())
            .and_then(|addr| addr.parse().ok());
        match addr {
            Some(addr) => Ok(Self {
                child,
                addr,
                _dir: dir,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("the proxy did not start: its first line was {line:?}").into())
            }
        }
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
