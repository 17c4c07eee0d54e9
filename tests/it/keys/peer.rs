//! `ClientIp::peer`: the connection's address is the key (an IPv6 client's /64), whatever the
//! forwarding headers say; no address is a 400.

use std::net::SocketAddr;

use super::{LIMIT, app, assert_bad_request, hit, layer, used};
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::extract::connect_info::MockConnectInfo;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;
use tower_redis_ratelimit::MemoryStore;
use tower_redis_ratelimit::key::ClientIp;

#[tokio::test]
async fn peer_addresses_have_their_own_limits() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    for expected in 1..=LIMIT {
        // The port changes with every connection; it is not part of the key.
        let peer = format!("203.0.113.5:{}", 40_000 + expected);
        assert_eq!(hit(&app, &peer, &[]).await, (200, expected.to_string()));
    }
    assert_eq!(hit(&app, "203.0.113.5:1", &[]).await.0, 429);
    assert_eq!(hit(&app, "203.0.113.6:1", &[]).await, (200, "1".into()));
    assert_eq!(used(&store, "203.0.113.5").await, LIMIT);
    assert_eq!(used(&store, "203.0.113.6").await, 1);
}

#[tokio::test]
async fn peer_ignores_forwarding_headers_entirely() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    for fake in ["1.1.1.1", "2.2.2.2", "3.3.3.3"] {
        let forwarded = format!("for={fake}");
        let headers = [("x-forwarded-for", fake), ("forwarded", forwarded.as_str())];
        assert_eq!(hit(&app, "203.0.113.5:1", &headers).await.0, 200);
    }
    let headers = [("x-forwarded-for", "4.4.4.4"), ("forwarded", "for=4.4.4.4")];
    assert_eq!(hit(&app, "203.0.113.5:1", &headers).await.0, 429);
    assert_eq!(used(&store, "203.0.113.5").await, LIMIT);
    assert_eq!(store.len(), 1, "no key was made from a forwarded address");
}

#[tokio::test]
async fn ipv4_mapped_ipv6_peer_shares_the_ipv4_clients_limit() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    assert_eq!(hit(&app, "203.0.113.5:1000", &[]).await, (200, "1".into()));
    assert_eq!(
        hit(&app, "[::ffff:203.0.113.5]:1001", &[]).await,
        (200, "2".into())
    );
    assert_eq!(
        hit(&app, "[::ffff:cb00:7105]:1002", &[]).await,
        (200, "3".into()),
        "the hex spelling of the same mapped address"
    );
    assert_eq!(hit(&app, "[::ffff:203.0.113.5]:1003", &[]).await.0, 429);
    assert_eq!(hit(&app, "203.0.113.5:1004", &[]).await.0, 429);
    assert_eq!(used(&store, "203.0.113.5").await, LIMIT);
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn ipv6_peers_in_one_64_share_a_limit_and_other_64s_do_not() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    // Three addresses of one /64: a client rotating through its allocation.
    let same_net = [
        "[2001:db8:1:2::1]:1",
        "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1",
        "[2001:db8:1:2:abcd::9]:1",
    ];
    for (index, peer) in same_net.iter().enumerate() {
        assert_eq!(hit(&app, peer, &[]).await, (200, (index + 1).to_string()));
    }
    assert_eq!(hit(&app, "[2001:db8:1:2::77]:1", &[]).await.0, 429);
    // The neighbouring /64s are other subscribers.
    assert_eq!(
        hit(&app, "[2001:db8:1:3::1]:1", &[]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, "[2001:db8:1:1::1]:1", &[]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, "2001:db8:1:2::/64").await, LIMIT);
    assert_eq!(used(&store, "2001:db8:1:3::/64").await, 1);
    assert_eq!(store.len(), 3);
}

#[tokio::test]
async fn a_request_without_a_peer_address_is_a_400() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    // No ConnectInfo: the app was served without `into_make_service_with_connect_info`.
    let request = Request::get("/").body(Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_bad_request(
        response,
        "the client address is unknown: serve with `into_make_service_with_connect_info::<SocketAddr>()` \
         (axum), or put the peer's `SocketAddr` into the request extensions",
    )
    .await;
}

/// A server that is not axum (hyper, tonic, an accept loop of one's own) names the peer with a
/// plain `SocketAddr` in the request extensions.
#[tokio::test]
async fn a_socket_addr_that_any_server_can_provide_names_the_peer() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    for expected in ["1", "2"] {
        let mut request = Request::get("/").body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert("203.0.113.77:4711".parse::<SocketAddr>().unwrap());
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["rate-limiting-total-requests"], expected);
    }
}

#[tokio::test]
async fn mock_connect_info_stands_in_for_a_connection_in_tests() {
    let store = MemoryStore::new();
    let mock: SocketAddr = "192.0.2.44:4711".parse().unwrap();
    // As the getting-started guide does: the mock is the outermost layer.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer(ClientIp::peer(), &store))
        .layer(MockConnectInfo(mock));
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        let request = Request::get("/").body(Body::empty()).unwrap();
        statuses.push(
            app.clone()
                .oneshot(request)
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, "192.0.2.44").await, LIMIT);
    // A real connection's address wins over the mock, as with axum's `ConnectInfo` extractor.
    assert_eq!(hit(&app, "203.0.113.9:1", &[]).await, (200, "1".into()));
    assert_eq!(used(&store, "203.0.113.9").await, 1);
}

/// Over real TCP: the peer address axum's `ConnectInfo` reports is the key. Clients connect from
/// two loopback addresses (127.0.0.2 and 127.0.0.3), which Linux lets a socket bind.
#[tokio::test]
async fn served_over_tcp_each_peer_address_has_its_own_limit() {
    let store = MemoryStore::new();
    let app = app(ClientIp::peer(), &store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });

    async fn status_from(source: &str, server: SocketAddr) -> u16 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(server).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        reply[9..12].parse().unwrap()
    }

    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(status_from("127.0.0.2", address).await);
    }
    statuses.push(status_from("127.0.0.3", address).await);
    assert_eq!(statuses, [200, 200, 200, 429, 200]);
    assert_eq!(used(&store, "127.0.0.2").await, LIMIT);
    assert_eq!(used(&store, "127.0.0.3").await, 1);
    server.abort();
}
