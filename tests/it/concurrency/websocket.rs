//! WebSockets (seed 000): each user may hold N open sockets across every instance that shares a
//! Redis. Two axum servers on loopback share one `redis-server`; sockets opened through either
//! count against one limit, the slot is held for the life of the upgraded connection (not just
//! the 101 response), and closing a socket makes room for a new one.

use std::time::Duration;

use crate::support::{RedisServer, eventually};
use axum::Router;
use axum::extract::ws::{Message, WebSocket};
use axum::extract::{Extension, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, Message as ClientMessage};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{ConcurrencyLimitLayer, RedisStore};

const MAX_SOCKETS: u32 = 2;

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn socket(
    Extension(permit): Extension<ConcurrencyPermit>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |socket| async move {
        let _permit = permit;
        echo(socket).await;
    })
}

async fn echo(mut socket: WebSocket) {
    while let Some(Ok(message)) = socket.recv().await {
        if matches!(message, Message::Close(_)) || socket.send(message).await.is_err() {
            break;
        }
    }
}

/// One instance of the service, on a free loopback port, limited through `redis`.
async fn instance(redis: &RedisServer) -> String {
    let limit = ConcurrencyLimitLayer::builder()
        .name("sockets")
        .max_in_flight(MAX_SOCKETS)
        .key(HeaderKey::new("x-user"))
        .store(RedisStore::open(&redis.url()).unwrap())
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    let app = Router::new().route("/ws", get(socket)).layer(limit);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("ws://{address}/ws")
}

/// Opens a socket as `user`: the connected client, or the HTTP status of the refusal.
async fn open(url: &str, user: &str) -> Result<Client, u16> {
    let mut request = tungstenite::client::IntoClientRequest::into_client_request(url).unwrap();
    request
        .headers_mut()
        .insert("x-user", user.parse().unwrap());
    match connect_async(request).await {
        Ok((client, response)) => {
            assert_eq!(response.status(), 101);
            Ok(client)
        }
        Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(other) => panic!("the handshake failed unexpectedly: {other}"),
    }
}

/// The socket is alive: it echoes.
async fn echoes(client: &mut Client, text: &str) {
    client.send(ClientMessage::text(text)).await.unwrap();
    let reply = client.next().await.unwrap().unwrap();
    assert_eq!(reply.into_text().unwrap().as_str(), text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_are_limited_per_user_across_instances() {
    let redis = RedisServer::start();
    let (a, b) = (instance(&redis).await, instance(&redis).await);
    let key = "ratelimit:sockets:cc:{alice}";

    let mut first = open(&a, "alice").await.unwrap();
    let mut second = open(&b, "alice").await.unwrap();
    // The 101 responses are long gone; the sockets still hold their slots.
    echoes(&mut first, "one").await;
    echoes(&mut second, "two").await;
    assert_eq!(redis.zcard(key), 2);

    // The N+1th, through either instance, is refused with 429.
    assert_eq!(open(&a, "alice").await.unwrap_err(), 429);
    assert_eq!(open(&b, "alice").await.unwrap_err(), 429);
    // Another user is not affected.
    let mut bob = open(&a, "bob").await.unwrap();
    echoes(&mut bob, "bob").await;

    // Closing one socket gives its slot back, and a new one is accepted on the other instance.
    first.close(None).await.unwrap();
    drop(first);
    eventually(
        Duration::from_secs(10),
        "the closed socket's slot",
        || async { redis.zcard(key) == 1 },
    )
    .await;
    let mut third = open(&b, "alice").await.unwrap();
    echoes(&mut third, "three").await;
    echoes(&mut second, "still here").await;
    assert_eq!(open(&a, "alice").await.unwrap_err(), 429);
}
