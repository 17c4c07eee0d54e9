//! SIGTERM: `serve` stops taking questions, answers those in flight, removes its socket and
//! exits.

use std::time::Duration;

use crate::support::{Serve, get, limits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_and_removes_the_socket() {
    let mut serve = Serve::start(&format!(
        // No load balancer to leave: exit once drained.
        "[serve]\nlisten = \"127.0.0.1:0\"\nsocket = \"{{dir}}/serve.sock\"\naccess_log = \"off\"\n\
         connections = {{ drain_delay = \"0s\" }}\n{}",
        limits(5)
    ));
    let socket = serve.dir().join("serve.sock");
    assert!(socket.exists());
    let asked = [("x-forwarded-uri", "/api/x")];
    assert_eq!(
        get("127.0.0.1", &serve.url("/forward_auth"), &asked)
            .await
            .status(),
        200
    );
    serve.signal("-TERM");
    serve
        .process
        .exits_successfully_within(Duration::from_secs(10))
        .await;
    assert!(!socket.exists(), "the socket outlived the process");
}
