//! WebSocket tunnels: counted per key by the `websockets` limit while they live, through
//! reloads; closed with a close frame at the drain deadline of a shutdown.

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite;

use std::time::{Duration, Instant};

use crate::support::{Proxy, config_text, config_with, get_with, upstream};

pub(crate) async fn connect_ws(
    proxy: &Proxy,
    user: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tungstenite::Error,
> {
    use tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{}/ws", proxy.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("x-user", user.parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_tunnel_are_limited_and_survive_a_reload() {
    let upstream = upstream().await;
    // A concurrency limit on the same path too: the tunnel still holds the WebSocket slot.
    let config = format!(
        r#"{}
        [concurrency.sockets]
        paths = ["/ws"]
        max_in_flight = 5
        key = {{ header = "x-user" }}
        "#,
        config_text(upstream, 1)
    );
    let proxy = Proxy::start(&config);
    let mut socket = connect_ws(&proxy, "ann").await.unwrap();
    socket
        .send(tungstenite::Message::text("hello"))
        .await
        .unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed.to_text().unwrap(), "hello");
    // One tunnel per user: a second one for ann is refused, bob's passes.
    match connect_ws(&proxy, "ann").await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 429),
        other => panic!("a second tunnel for ann: {:?}", other.map(|_| ())),
    }
    drop(connect_ws(&proxy, "bob").await.unwrap());

    // Reload with a limit of 4: new requests get it; ann's tunnel stays open through it.
    assert_eq!(
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "r")])
            .await
            .status(),
        200
    );
    assert_eq!(
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "r")])
            .await
            .status(),
        429
    );
    std::fs::write(&proxy.config, config_text(upstream, 4)).unwrap();
    proxy.signal("-HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "after")]).await;
        if response.headers()["ratelimit-policy"] == "\"api\";q=4;w=60" {
            break;
        }
        assert!(Instant::now() < deadline, "the reload did not take");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The counts went on in the same in-process store: "r" had used 1 of the new 4.
    let statuses = {
        let mut statuses = Vec::new();
        for _ in 0..4 {
            let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "r")]).await;
            statuses.push(response.status().as_u16());
        }
        statuses
    };
    assert_eq!(statuses, [200, 200, 200, 429]);
    socket
        .send(tungstenite::Message::text("still"))
        .await
        .unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed.to_text().unwrap(), "still");

    // A closed tunnel gives its slot back.
    socket.close(None).await.unwrap();
    drop(socket);
    let deadline = Instant::now() + Duration::from_secs(10);
    while connect_ws(&proxy, "ann").await.is_err() {
        assert!(Instant::now() < deadline, "ann's slot was not given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The slots of open tunnels are kept through reloads, as rate counts are: a key at
/// `max_per_key = 2` with two tunnels open cannot open a third after a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_keep_the_slots_of_open_tunnels() {
    let upstream = upstream().await;
    let config = config_text(upstream, 10).replace("max_per_key = 1", "max_per_key = 2");
    assert!(config.contains("max_per_key = 2"));
    let proxy = Proxy::start(&config);
    let mut open = vec![
        connect_ws(&proxy, "ann").await.unwrap(),
        connect_ws(&proxy, "ann").await.unwrap(),
    ];
    for reload in 0..2 {
        // A change that shows when the reload has taken: the API's limit.
        std::fs::write(
            &proxy.config,
            config.replace("limit = 10", &format!("limit = {}", 20 + reload)),
        )
        .unwrap();
        proxy.signal("-HUP");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "probe")]).await;
            if response.headers()["ratelimit-policy"]
                == format!("\"api\";q={};w=60", 20 + reload).as_str()
            {
                break;
            }
            assert!(Instant::now() < deadline, "reload {reload} did not take");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match connect_ws(&proxy, "ann").await {
            Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 429),
            other => panic!(
                "a third tunnel after reload {reload}: {:?}",
                other.map(|_| ())
            ),
        }
    }
    // Both tunnels still carry messages.
    for socket in &mut open {
        socket
            .send(tungstenite::Message::text("still"))
            .await
            .unwrap();
        assert_eq!(
            socket.next().await.unwrap().unwrap().to_text().unwrap(),
            "still"
        );
    }
}

/// At the drain deadline of a shutdown, an open tunnel gets a close frame (1001, going away),
/// and the process exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_are_closed_with_a_close_frame_at_the_drain_deadline() {
    let upstream = upstream().await;
    let mut proxy = Proxy::start(&config_with(
        upstream,
        10,
        r#"connections = { drain_delay = "0s", drain_timeout = "500ms" }"#,
    ));
    let mut socket = connect_ws(&proxy, "ann").await.unwrap();
    socket
        .send(tungstenite::Message::text("hello"))
        .await
        .unwrap();
    assert_eq!(
        socket.next().await.unwrap().unwrap().to_text().unwrap(),
        "hello"
    );
    let started = Instant::now();
    proxy.signal("-TERM");
    // Open until the deadline: messages still pass.
    socket
        .send(tungstenite::Message::text("draining"))
        .await
        .unwrap();
    assert_eq!(
        socket.next().await.unwrap().unwrap().to_text().unwrap(),
        "draining"
    );
    let closed = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .expect("closed within 10 s");
    match closed {
        Some(Ok(tungstenite::Message::Close(Some(frame)))) => {
            assert_eq!(
                frame.code,
                tungstenite::protocol::frame::coding::CloseCode::Away
            );
        }
        other => panic!("expected a close frame, got {other:?}"),
    }
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    proxy
        .exits_successfully_within(Duration::from_secs(10))
        .await;
}
