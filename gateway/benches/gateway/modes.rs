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
    /// nginx configured as gateway/docs/gateways.md says, asking `ratelimit-gateway serve` (counts in
    /// process, every request admitted) through `auth_request` before proxying to the upstream:
    /// what `serve` adds to nginx's requests.
    ServeAuthRequest,
}

impl Mode {
    /// Every mode, in the order of the report.
    pub(crate) const ALL: [Mode; 6] = [
        Mode::Direct,
        Mode::Nginx,
        Mode::ProxyMemory,
        Mode::ProxyRedis,
        Mode::ProxyRefusing,
        Mode::ServeAuthRequest,
    ];

    /// Its short name, as `GATEWAY_BENCH_MODES` lists it.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Nginx => "nginx",
            Mode::ProxyMemory => "proxy-memory",
            Mode::ProxyRedis => "proxy-redis",
            Mode::ProxyRefusing => "proxy-refusing",
            Mode::ServeAuthRequest => "serve",
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Direct => "upstream directly",
            Mode::Nginx => "nginx reverse proxy",
            Mode::ProxyMemory => "proxy, in-process store",
            Mode::ProxyRedis => "proxy, Redis store",
            Mode::ProxyRefusing => "proxy, refusing everything",
            Mode::ServeAuthRequest => "nginx + auth_request → serve",
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
    Nginx {
        _nginx: Nginx,
    },
    Proxy {
        _proxy: GatewayProcess,
    },
    /// nginx in front, `serve` behind it: nginx stops first.
    Serve {
        _nginx: Nginx,
        _serve: GatewayProcess,
    },
}

impl Target {
    pub(crate) fn start(
        mode: Mode,
        settings: &Settings,
        upstream: SocketAddr,
        redis_url: Option<&str>,
    ) -> Result<Target, BoxError> {
        let proxy = |store: &str, policy: &str, key: &str| {
            GatewayProcess::start(
                "proxy",
                &proxy_config(upstream, settings.workers, store, policy, key),
            )
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
                let redis_url = redis_url.ok_or("the Redis mode needs Redis")?;
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
            Mode::ServeAuthRequest => {
                let serve = GatewayProcess::start("serve", &serve_config(settings.workers, gcra))?;
                let config = testkit::nginx::documented(
                    include_str!("../../docs/gateways.md"),
                    &[
                        ("server 127.0.0.1:3000;", format!("server {upstream};")),
                        ("server 127.0.0.1:8081;", format!("server {};", serve.addr)),
                        ("listen 8080;", "listen 127.0.0.1:{port};".to_owned()),
                    ],
                )?;
                let nginx = Nginx::start(settings.workers, &config)?;
                let addr = nginx.addr();
                let running = Running::Serve {
                    _nginx: nginx,
                    _serve: serve,
                };
                (addr, running)
            }
        };
        Ok(Target {
            addr,
            _running: running,
        })
    }
}

/// nginx in front of the upstream as its guide configures a reverse proxy: HTTP/1.1 and a pool
/// of keep-alive connections upstream, no access log (the proxy's is off too).
fn nginx_config(upstream: SocketAddr) -> String {
    format!(
        "upstream app {{ server {upstream}; keepalive 64; }}\n\
         server {{\n\
           listen 127.0.0.1:{{port}};\n\
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

/// `serve` with counts in process, keyed as the proxy modes are, with as many workers as nginx
/// has.
fn serve_config(workers: usize, rule: &str) -> String {
    format!(
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"off\"\n\
         connections = {{ workers = {workers} }}\n\n\
         [policies.bench]\nrules = [{rule}]\n\n\
         [routes.bench]\npaths = [\"/\"]\npolicy = \"bench\"\nkey = {{ header = \"x-key\" }}\n"
    )
}

/// A `ratelimit-gateway proxy` or `serve` process, killed when dropped.
struct GatewayProcess {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl GatewayProcess {
    /// Runs `ratelimit-gateway <command>` on `config`, and reads the TCP address its start-up
    /// message (on standard error, with the other messages) names; the messages after it are
    /// passed on to the benchmark's standard error.
    fn start(command: &str, config: &str) -> Result<Self, BoxError> {
        let dir = TempDir::new("gateway-bench")?;
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, config)?;
        let mut child = Command::new(env!("CARGO_BIN_EXE_ratelimit-gateway"))
            .arg(command)
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let announced = format!("{command}: listening on http://");
        let mut line = String::new();
        if let Some(stderr) = child.stderr.take() {
            let mut stderr = BufReader::new(stderr);
            loop {
                line.clear();
                if stderr.read_line(&mut line)? == 0 {
                    break;
                }
                if let Some(at) = line.find(&announced) {
                    line = line[at..].trim_end().to_owned();
                    break;
                }
                eprint!("{line}");
            }
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::stderr()));
        }
        let addr = line
            .strip_prefix(&format!("{command}: listening on http://"))
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
                Err(format!("`{command}` did not start: its first line was {line:?}").into())
            }
        }
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
