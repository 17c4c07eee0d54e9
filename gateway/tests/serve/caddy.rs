//! A real Caddy, its site block as gateway/docs/gateways.md writes it, asking `serve` through
//! `forward_auth`: what a client of Caddy sees.

use std::net::SocketAddr;

use testkit::peer::{Peer, documented_block};
use testkit::{TempDir, free_port};

use crate::scenarios::{self, every_gateways_scenarios};
use crate::support::{GUIDE, Gateway, Kind, Passes, Process, Serve};

/// Caddy with the guide's site block, its address (`example.com`) the test's port over plain
/// HTTP, in front of `upstream`, asking `serve` on its TCP address or else on its Unix socket
/// (`unix//path`, as the guide says). A global block of the test's own turns the admin
/// endpoint off (tests running at once would all want its port 2019), keeps Caddy from saving
/// its configuration under `~/.config`, and binds the site to 127.0.0.1 only (on every
/// address, its port would collide with the tests' clients' own ports on 127.0.0.2); it has
/// nothing to do with limiting.
pub(crate) fn start(upstream: SocketAddr, serve: &Serve) -> Gateway {
    let port = free_port();
    let asks = match &serve.addr {
        Some(addr) => addr.clone(),
        None => format!("unix/{}", serve.socket().display()),
    };
    let site = documented_block(
        GUIDE,
        "caddyfile",
        "forward_auth",
        &[
            ("example.com", format!("http://127.0.0.1:{port}")),
            (
                "forward_auth 127.0.0.1:8081",
                format!("forward_auth {asks}"),
            ),
            (
                "reverse_proxy 127.0.0.1:3000",
                format!("reverse_proxy {upstream}"),
            ),
        ],
    )
    .unwrap();
    let dir = TempDir::new("caddy").unwrap();
    let caddyfile =
        format!("{{\n\tadmin off\n\tpersist_config off\n\tdefault_bind 127.0.0.1\n}}\n\n{site}\n");
    std::fs::write(dir.path().join("Caddyfile"), caddyfile).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let args = ["run", "--config", "Caddyfile", "--adapter", "caddyfile"];
    let peer = Peer::start("caddy", &args, dir, addr).unwrap();
    Gateway {
        addr,
        passes: Passes::ToService,
        process: Process::Peer(peer),
    }
}

every_gateways_scenarios!(Kind::Caddy);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_over_a_unix_socket() {
    scenarios::over_a_unix_socket(Kind::Caddy).await;
}
