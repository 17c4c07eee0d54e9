//! A real Traefik, its static and dynamic configuration as gateway/docs/gateways.md writes them,
//! asking `serve` through ForwardAuth: what a client of Traefik sees. (Traefik's ForwardAuth
//! speaks HTTP to an address only: no Unix socket.)

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use testkit::peer::{Peer, documented_block};
use testkit::{TempDir, free_port};

use crate::scenarios::every_gateways_scenarios;
use crate::support::{GUIDE, Gateway, Kind, Passes, Process, Serve, raw_get};

/// Traefik with the guide's two files: the static one listening on the test's port and
/// reading the dynamic one from the test's directory (a global section of the test's own
/// keeps it from calling home), the dynamic one in front of `upstream`, asking `serve` on its
/// TCP address. Ready once its router serves: it opens its entry point before the file
/// provider's routes are in place, and answers 404 until then.
pub(crate) async fn start(upstream: SocketAddr, serve: &Serve) -> Gateway {
    let asks = serve
        .addr
        .as_deref()
        .expect("Traefik's ForwardAuth asks over TCP");
    let port = free_port();
    let dir = TempDir::new("traefik").unwrap();
    let dynamic_path = dir.path().join("dynamic.yml");
    let dynamic = documented_block(
        GUIDE,
        "yaml",
        "Traefik's dynamic configuration",
        &[
            (
                "http://127.0.0.1:8081/forward_auth",
                format!("http://{asks}/forward_auth"),
            ),
            ("http://127.0.0.1:3000", format!("http://{upstream}")),
        ],
    )
    .unwrap();
    let r#static = documented_block(
        GUIDE,
        "yaml",
        "Traefik's static configuration",
        &[
            ("\":8080\"", format!("\"127.0.0.1:{port}\"")),
            (
                "/etc/traefik/dynamic.yml",
                dynamic_path.display().to_string(),
            ),
        ],
    )
    .unwrap();
    std::fs::write(&dynamic_path, dynamic).unwrap();
    std::fs::write(
        dir.path().join("traefik.yml"),
        format!("global:\n  checkNewVersion: false\n  sendAnonymousUsage: false\n{static}\n"),
    )
    .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let peer = Peer::start("traefik", &["--configFile=traefik.yml"], dir, addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while raw_get("127.0.0.1", addr, "/", &[]).await.status == 404 {
        assert!(
            Instant::now() < deadline,
            "Traefik did not route within 20 s: {}",
            peer.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Gateway {
        addr,
        passes: Passes::ToService,
        process: Process::Peer(peer),
    }
}

every_gateways_scenarios!(Kind::Traefik);
