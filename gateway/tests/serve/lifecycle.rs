//! SIGTERM: `serve` stops taking questions, answers those in flight, removes its socket and
//! exits.

use std::time::Duration;

use crate::certificates::{certificate_in, served};
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

/// SIGHUP reads the certificate's files again (relative to the file's directory): a new TLS
/// connection is served the new one; a reload that changes a start-only field says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rotates_the_certificate_and_names_what_it_did_not_apply() {
    let dir = testkit::TempDir::new("serve-tls").unwrap();
    let first = certificate_in(dir.path());
    let config = format!(
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"off\"\n\
         tls = {{ certificate = \"cert.pem\", private_key = \"key.pem\" }}\n{}",
        limits(5)
    );
    let (serve, _) = Serve::start_in(dir, &config);
    let addr = serve.addr.clone().unwrap();
    assert_eq!(served(&addr, &[&first]).await, first);

    let second = certificate_in(serve.dir());
    let socket = serve.dir().join("later.sock");
    let changed = config.replace(
        "[serve]\n",
        &format!("[serve]\nsocket = \"{}\"\n", socket.display()),
    );
    std::fs::write(&serve.config, changed).unwrap();
    serve.signal("-HUP");
    let message = serve.message_containing("configuration reloaded");
    assert!(
        message.contains(&format!(
            "not applied until restart: serve.socket (unset → {})",
            socket.display()
        )),
        "{message}"
    );
    assert_eq!(served(&addr, &[&first, &second]).await, second);
    assert!(!socket.exists());
}
