//! A real Envoy in front of the upstream, asking a `ratelimit-gateway serve` process, each
//! configured by the files gateway/docs/envoy.md shows (Envoy's, the rules of envoyproxy/ratelimit's
//! format, `serve.toml`), read from the page with their addresses and ports changed, and only
//! what a test's [`Setup`] says besides.

use std::net::SocketAddr;
use std::path::Path;

use testkit::peer::{Peer, documented_block};
use testkit::{RedisServer, TempDir};

use crate::process::GatewayProcess;

/// The guide whose files these are.
pub(crate) const PAGE: &str = include_str!("../../docs/envoy.md");

/// What a test changes of the page's files beside addresses: how `serve` is reached, how it
/// fails, and the timeouts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    /// `[serve.envoy] failure_mode`: `"open"` (the page's) or `"closed"`.
    pub(crate) failure_mode: &'static str,
    /// On `serve`'s Unix socket (the page's `pipe` cluster) rather than on TCP.
    pub(crate) unix: bool,
    /// Envoy's filter `timeout` in place of the page's, for what an operator may set instead.
    pub(crate) envoy_timeout: Option<&'static str>,
    /// `[serve.envoy] deadline` in place of the page's.
    pub(crate) deadline: Option<&'static str>,
}

impl Setup {
    /// The page's files as they are, on TCP.
    pub(crate) const DOCUMENTED: Setup = Setup {
        failure_mode: "open",
        unix: false,
        envoy_timeout: None,
        deadline: None,
    };
}

/// Where `serve` is asked.
enum Ask<'a> {
    Tcp(SocketAddr),
    Unix(&'a Path),
}

/// Envoy's file of the page, as it is there.
pub(crate) fn documented_envoy() -> String {
    documented_block(PAGE, "yaml", "name: ingress", &[]).unwrap()
}

/// `envoy` (the page's file) with the page's Unix socket variant of the `ratelimit` cluster (a
/// block of its own) in place of its TCP one, the socket at `path`.
pub(crate) fn on_unix_socket(envoy: &str, path: &Path) -> String {
    let cluster = documented_block(
        PAGE,
        "yaml",
        "pipe:",
        &[(
            "/run/ratelimit-gateway/serve.sock",
            path.display().to_string(),
        )],
    )
    .unwrap();
    // The TCP cluster is the last of the file: what follows its name goes.
    let (head, _tcp) = envoy
        .split_once("\n  - name: ratelimit\n")
        .expect("the page's Envoy file ends with the ratelimit cluster");
    let (_, unix) = cluster
        .split_once("  clusters:\n")
        .expect("the page's Unix socket cluster under `clusters:`");
    format!("{head}\n{unix}")
}

/// The page's rules of the domain its Envoy file asks about.
fn documented_rules() -> String {
    documented_block(PAGE, "yaml", "# ratelimit/config/edge.yaml", &[]).unwrap()
}

/// The page's `serve.toml`: asking `redis_url`, listening as `listener` says (`listen = …` or
/// `socket = …`), failing and waiting as `setup` says.
fn documented_serve(redis_url: &str, listener: String, setup: Setup) -> String {
    let file = documented_block(
        PAGE,
        "toml",
        "[serve.envoy]",
        &[
            (
                "url = \"redis://10.0.0.5:6379\"",
                format!("url = {redis_url:?}"),
            ),
            ("listen = \"0.0.0.0:8081\"", listener),
            (
                "admin = \"127.0.0.1:9090\"",
                "admin = \"127.0.0.1:0\"".to_owned(),
            ),
            (
                "failure_mode = \"open\"",
                format!("failure_mode = {:?}", setup.failure_mode),
            ),
        ],
    )
    .unwrap();
    match setup.deadline {
        Some(deadline) => with(
            &file,
            &[("deadline = \"100ms\"", format!("deadline = {deadline:?}"))],
        ),
        None => file,
    }
}

/// `text` with each `from` replaced by its `to`, each required to be there.
pub(crate) fn with(text: &str, replacements: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in replacements {
        assert!(text.contains(from), "no {from:?} in {text}");
        text = text.replace(from, to);
    }
    text
}

/// An address in Envoy's flow style.
pub(crate) fn socket_address(addr: SocketAddr) -> String {
    format!("{{ address: {}, port_value: {} }}", addr.ip(), addr.port())
}

/// `ratelimit-gateway serve` of the file at `config`, its messages also written to `log`; its
/// first line and its TCP address (`http://…`), or what follows "listening on" when it has none.
pub(crate) fn start_serve(
    config: &Path,
    log: Option<std::fs::File>,
) -> (GatewayProcess, String, String) {
    let (process, line, _stdout) = GatewayProcess::start("serve", config, log);
    let addr = line
        .strip_prefix("serve: listening on ")
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (process, line, addr)
}

/// The upstream, `serve` and Envoy of the page, running until dropped.
pub(crate) struct Front {
    /// Envoy's listener: where clients send their requests.
    pub(crate) addr: SocketAddr,
    envoy: Peer,
    _serve: GatewayProcess,
    dir: TempDir,
}

impl Front {
    /// The upstream, `serve` over `redis` and Envoy, as `setup` says.
    pub(crate) async fn start(redis: &RedisServer, setup: Setup) -> Front {
        let backend = crate::web::upstream().await;
        let dir = TempDir::new("envoy-front").unwrap();
        // `files = "ratelimit/config"` of the page's serve.toml: beside it.
        let rules = dir.path().join("ratelimit/config");
        std::fs::create_dir_all(&rules).unwrap();
        std::fs::write(rules.join("edge.yaml"), documented_rules()).unwrap();
        let socket = dir.path().join("serve.sock");
        let listener = if setup.unix {
            format!("socket = \"{}\"", socket.display())
        } else {
            "listen = \"127.0.0.1:0\"".to_owned()
        };
        let serve_toml = documented_serve(&redis.url(), listener, setup);
        let config = dir.path().join("serve.toml");
        std::fs::write(&config, serve_toml).unwrap();
        let serve_log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
        let (serve, line, addr) = start_serve(&config, Some(serve_log));
        let ask = if setup.unix {
            Ask::Unix(&socket)
        } else {
            let addr = addr.strip_prefix("http://").unwrap_or(&addr);
            Ask::Tcp(addr.parse().unwrap_or_else(|_| panic!("{line}")))
        };
        let envoy = start_envoy(backend, &ask, setup.envoy_timeout);
        Front {
            addr: envoy.0,
            envoy: envoy.1,
            _serve: serve,
            dir,
        }
    }

    /// The URL of `path` (reqwest resolves `.` and `..` segments itself: send those with
    /// `web::raw_get`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What Envoy and `serve` logged, for a failure's message.
    pub(crate) fn log(&self) -> String {
        let serve = std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default();
        format!("Envoy:\n{}\nserve:\n{serve}", self.envoy.log())
    }
}

/// Envoy of the page on a free port.
fn start_envoy(
    backend: SocketAddr,
    serve: &Ask<'_>,
    timeout: Option<&'static str>,
) -> (SocketAddr, Peer) {
    run_envoy(|listen| {
        let mut file = with(
            &documented_envoy(),
            &[
                (
                    "{ address: 0.0.0.0, port_value: 8080 }",
                    socket_address(listen),
                ),
                (
                    "{ address: 127.0.0.1, port_value: 3000 }",
                    socket_address(backend),
                ),
            ],
        );
        file = match serve {
            Ask::Tcp(addr) => with(
                &file,
                &[(
                    "{ address: 127.0.0.1, port_value: 8081 }",
                    socket_address(*addr),
                )],
            ),
            Ask::Unix(path) => on_unix_socket(&file, path),
        };
        if let Some(timeout) = timeout {
            file = with(&file, &[("timeout: 0.25s", format!("timeout: {timeout}"))]);
        }
        file
    })
}

/// Envoy of the file `file` makes for a listener at the address it is given, on a free port;
/// three ports are tried, as another process may take the one just found free before Envoy
/// binds it.
pub(crate) fn run_envoy(file: impl Fn(SocketAddr) -> String) -> (SocketAddr, Peer) {
    // A missing Envoy fails here with how to install it.
    testkit::peer::find("envoy").unwrap_or_else(|err| panic!("{err}"));
    let mut failure = String::new();
    for _ in 0..3 {
        let listen = SocketAddr::from(([127, 0, 0, 1], testkit::free_port()));
        let dir = TempDir::new("envoy").unwrap();
        std::fs::write(dir.path().join("envoy.yaml"), file(listen)).unwrap();
        // No hot restart (its shared memory is one per machine unless told otherwise), one
        // worker: two cores are shared by the whole suite.
        let args = [
            "-c",
            "envoy.yaml",
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "--log-level",
            "warning",
        ];
        match Peer::start("envoy", &args, dir, listen) {
            Ok(peer) => return (listen, peer),
            Err(err) => failure = err.to_string(),
        }
    }
    panic!("Envoy did not start: {failure}");
}
