//! `ratelimit-gateway reset` on `serve`'s file: a client's address, the key of a `client_ip`
//! route, reset in the shared Redis store, and the running `serve` admits it again.

use std::process::Command;

use crate::process::{BINARY, stdout_of};
use crate::support::{Serve, get, limits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_address_is_reset_from_the_command_line() {
    let redis = testkit::RedisServer::start();
    let serve = Serve::start(&format!(
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"off\"\n{}\n[stores.shared]\ntype = \
         \"redis\"\nurl = \"{}\"\n",
        limits(1),
        redis.url()
    ));
    let url = serve.url("/forward_auth");
    let ask = async || {
        let asked = [
            ("x-forwarded-uri", "/api/x"),
            ("x-forwarded-for", "203.0.113.5"),
        ];
        get("127.0.0.1", &url, &asked).await.status().as_u16()
    };
    assert_eq!(ask().await, 200);
    assert_eq!(ask().await, 429);
    let mut command = Command::new(BINARY);
    command.arg("reset").arg(&serve.config);
    command.args(["--route", "api", "--key", "203.0.113.5"]);
    assert_eq!(
        stdout_of(command).await,
        "reset key \"203.0.113.5\" of route \"api\"\n"
    );
    // The one instance made the reset through Redis, whose message it hears: asked until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ask().await != 200 {
        assert!(std::time::Instant::now() < deadline, "still refused");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(ask().await, 429);
}
