//! SIGTERM: `/readyz` turns 503 while serving goes on for the drain delay, then no new
//! connections, what is in flight finishes, and the process exits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::support::{Proxy, client, config_text, config_with, free_addr, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_what_is_in_flight_then_exits() {
    let upstream = upstream().await;
    // No load balancer to leave: the drain starts at once.
    let mut proxy = Proxy::start(&config_with(
        upstream,
        3,
        r#"connections = { drain_delay = "0s" }"#,
    ));
    assert_eq!(
        client()
            .get(proxy.url("/open/fail"))
            .send()
            .await
            .unwrap()
            .status(),
        500
    );
    // A response half sent when SIGTERM comes is still sent whole.
    let mut streaming = client()
        .get(proxy.url("/open/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(streaming.chunk().await.unwrap().unwrap(), "first;");
    proxy.signal("-TERM");
    assert_eq!(streaming.chunk().await.unwrap().unwrap(), "last");
    proxy
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}

/// An upstream whose `/held` answers once the test releases it, telling the test when a
/// request has arrived; anything else at once.
async fn held_upstream() -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    Arc<Notify>,
) {
    let (arrived, arrivals) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let released = Arc::clone(&release);
    let app = axum::Router::new()
        .route(
            "/held",
            axum::routing::get(move || {
                let (arrived, released) = (arrived.clone(), Arc::clone(&released));
                async move {
                    let _ = arrived.send(());
                    released.notified().await;
                    "released"
                }
            }),
        )
        .fallback(|| async { "ok" });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, arrivals, release)
}

/// Polls `check` every 20 ms until it is true, failing the test after `within`.
async fn until<F: AsyncFnMut() -> bool>(what: &str, within: Duration, mut check: F) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "not {what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The order a load balancer needs: on SIGTERM `/readyz` turns 503 at once while new requests
/// are still served (for `drain_delay`), then new connections are refused while the request in
/// flight finishes, the admin address answering throughout; then the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_turns_readyz_503_first_then_stops_accepting_after_the_drain_delay() {
    let (upstream, mut arrivals, release) = held_upstream().await;
    let admin = free_addr();
    let mut proxy = Proxy::start(&config_with(
        upstream,
        100,
        &format!(
            "admin = \"{admin}\"\nconnections = {{ drain_delay = \"6s\", drain_timeout = \"20s\" }}"
        ),
    ));
    let readyz = async || {
        // A new client each time: a new connection, as a load balancer's probe.
        let response = client().get(format!("http://{admin}/readyz")).send().await;
        response.map(|response| response.status().as_u16()).ok()
    };
    assert_eq!(readyz().await, Some(200));
    let held = tokio::spawn(client().get(proxy.url("/held")).send());
    tokio::time::timeout(Duration::from_secs(10), arrivals.recv())
        .await
        .expect("the held request reached the upstream");

    proxy.signal("-TERM");
    let signalled = Instant::now();
    until("unready", Duration::from_secs(5), async || {
        readyz().await == Some(503)
    })
    .await;
    // Still serving, on new connections, while load balancers move away.
    let during = client().get(proxy.url("/open/x")).send().await.unwrap();
    assert_eq!(during.status(), 200);
    assert!(
        signalled.elapsed() < Duration::from_secs(6),
        "the check above came after the drain delay: {:?}",
        signalled.elapsed()
    );
    let addr = proxy.addr.clone();
    until(
        "refusing connections",
        Duration::from_secs(15),
        async || tokio::net::TcpStream::connect(&addr).await.is_err(),
    )
    .await;
    assert!(signalled.elapsed() >= Duration::from_secs(6));
    // The admin address still answers, and the request in flight is still waiting.
    assert_eq!(readyz().await, Some(503));
    assert!(!held.is_finished());
    release.notify_one();
    let held = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held request finished")
        .unwrap()
        .unwrap();
    assert_eq!(held.status(), 200);
    assert_eq!(held.text().await.unwrap(), "released");
    proxy
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}

/// A second SIGTERM ends the drain delay at once: an operator who insists is not kept waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_ends_the_drain_delay() {
    let admin = free_addr();
    let mut proxy = Proxy::start(&config_with(
        upstream().await,
        100,
        &format!("admin = \"{admin}\"\nconnections = {{ drain_delay = \"1h\" }}"),
    ));
    proxy.signal("-TERM");
    until("unready", Duration::from_secs(5), async || {
        let response = client().get(format!("http://{admin}/readyz")).send().await;
        response.is_ok_and(|response| response.status() == 503)
    })
    .await;
    proxy.signal("-TERM");
    proxy
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}

/// A reload applies what it can and names each field read at start only that changed: the
/// process still listens where it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_names_what_it_did_not_apply() {
    let upstream = upstream().await;
    let config = config_text(upstream, 3);
    let proxy = Proxy::start(&config);
    let elsewhere = free_addr();
    let moved = config
        .replace(
            r#"listen = "127.0.0.1:0""#,
            &format!(r#"listen = "{elsewhere}""#),
        )
        .replace("limit = 3", "limit = 4");
    std::fs::write(&proxy.config, moved).unwrap();
    proxy.signal("-HUP");
    let message = proxy.message_containing("configuration reloaded");
    assert!(
        message.contains(&format!(
            "not applied until restart: proxy.listen (127.0.0.1:0 → {elsewhere})"
        )),
        "{message}"
    );
    assert!(message.contains("WARN"), "{message}");
    // The limits were applied, the address was not.
    let response = client()
        .get(proxy.url("/api/echo"))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["ratelimit-policy"], "\"api\";q=4;w=60");
}
