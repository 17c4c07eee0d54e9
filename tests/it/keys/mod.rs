//! Every key extractor end to end through an axum router: who is counted against which limit, what
//! a request without a key gets, and that forwarded addresses cannot be spoofed.
//!
//! Each app shares its `MemoryStore` with the test, which peeks (cost 0) at exact keys to prove
//! which key a request was counted against.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::extract::connect_info::MockConnectInfo;
use axum::middleware::{self, Next};
use axum::routing::get;
use http::request::Parts;
use http::{Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{ServiceBuilder, ServiceExt};
use tower_redis_ratelimit::key::{
    ClientIp, ForwardedHeader, GlobalKey, HeaderKey, Key, KeyError, KeyExtractor, KeyExtractorExt,
    UserId,
};
use tower_redis_ratelimit::{MemoryStore, MissingKey, Policy, Quota, RateLimitLayer, Rule, Store};

use crate::support::{get as send, header, text};

/// Three requests per hour per key.
const LIMIT: u64 = 3;

fn rule() -> Rule {
    Rule::fixed_window("per-client", Quota::per_hour(LIMIT as u32))
}

fn layer(key: impl KeyExtractor, store: &MemoryStore) -> RateLimitLayer {
    RateLimitLayer::builder()
        .rule(rule())
        .key(key)
        .store(store.clone())
        .build()
        .unwrap()
}

fn app(key: impl KeyExtractor, store: &MemoryStore) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer(key, store))
}

/// How much of the quota `key` has used, without using any (a cost-0 peek).
async fn used(store: &MemoryStore, key: impl Into<Key>) -> u64 {
    let policy = Policy::try_from(rule()).unwrap();
    let decision = store.check(&key.into(), &policy, 0).await.unwrap();
    decision.used()
}

/// Sends one request and returns its status and `Rate-Limiting-Total-Requests`.
async fn hit(app: &Router, peer: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let response = send(app, "/", peer, headers).await;
    (
        response.status().as_u16(),
        header(&response, "rate-limiting-total-requests"),
    )
}

/// Asserts a 400 problem+json whose detail says exactly `why`, with the route's (static)
/// `RateLimit-Policy` and none of the headers that need a decision.
async fn assert_bad_request(response: Response<Body>, why: &str) {
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let policies: Vec<_> = response
        .headers()
        .get_all("ratelimit-policy")
        .iter()
        .collect();
    assert_eq!(policies, [r#""per-client";q=3;w=3600"#], "on a 400");
    for name in [
        "rate-limiting-state",
        "rate-limiting-total-requests",
        "rate-limiting-expires-at",
        "ratelimit",
        "retry-after",
    ] {
        assert_eq!(header(&response, name), "", "{name} on a 400");
    }
    let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "type": "about:blank",
            "title": "Bad Request",
            "status": 400,
            "detail": format!("This request cannot be rate limited: {why}."),
        })
    );
}

// ---------------------------------------------------------------------------------------------
// HeaderKey

#[tokio::test]
async fn header_key_limits_each_value_and_trims_it() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("x-api-key"), &store);
    let peer = "203.0.113.1:1000";
    assert_eq!(
        hit(&app, peer, &[("x-api-key", "k1")]).await,
        (200, "1".into())
    );
    // Surrounding whitespace is not part of the key; the header name is case-insensitive.
    assert_eq!(
        hit(&app, peer, &[("X-Api-Key", " k1 ")]).await,
        (200, "2".into())
    );
    // Another client address with the same key shares the limit.
    assert_eq!(
        hit(&app, "198.51.100.2:2", &[("x-api-key", "k1")]).await,
        (200, "3".into())
    );
    assert_eq!(
        hit(&app, peer, &[("x-api-key", "k1")]).await,
        (429, "3".into())
    );
    // Another key has its own limit.
    assert_eq!(
        hit(&app, peer, &[("x-api-key", "k2")]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, "k1").await, 3);
    assert_eq!(used(&store, "k2").await, 1);
}

#[tokio::test]
async fn header_key_missing_blank_or_repeated_is_a_400_naming_the_header() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("X-Api-Key"), &store);
    let peer = "203.0.113.1:1000";
    assert_bad_request(
        send(&app, "/", peer, &[]).await,
        "the `x-api-key` header is missing",
    )
    .await;
    assert_bad_request(
        send(&app, "/", peer, &[("x-api-key", "   ")]).await,
        "the `x-api-key` header is empty",
    )
    .await;
    // Two lines: letting the client pick which one counts would let it pick a fresh limit.
    assert_bad_request(
        send(&app, "/", peer, &[("x-api-key", "k1"), ("x-api-key", "k2")]).await,
        "the `x-api-key` header must appear only once",
    )
    .await;
    // None of those counted against anything.
    assert_eq!(store.len(), 0);
}

#[tokio::test]
async fn header_key_joins_several_headers_unambiguously() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("x-tenant").and("x-user"), &store);
    let peer = "203.0.113.1:1000";
    let acme_alice = [("x-tenant", "acme"), ("x-user", "alice")];
    for expected in 1..=LIMIT {
        assert_eq!(
            hit(&app, peer, &acme_alice).await,
            (200, expected.to_string())
        );
    }
    assert_eq!(hit(&app, peer, &acme_alice).await.0, 429);
    // Same user in another tenant, same tenant another user: each its own limit.
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "other"), ("x-user", "alice")]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "acme"), ("x-user", "bob")]).await,
        (200, "1".into())
    );
    // A separator inside a value cannot forge another pair's key.
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "a-b"), ("x-user", "c")]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, peer, &[("x-tenant", "a"), ("x-user", "b-c")]).await,
        (200, "1".into())
    );
    // The key is the values, in order, joined by the unit separator.
    assert_eq!(used(&store, b"acme\x1falice".as_slice()).await, LIMIT);
    assert_eq!(used(&store, b"other\x1falice".as_slice()).await, 1);
    // Both headers are required.
    assert_bad_request(
        send(&app, "/", peer, &[("x-tenant", "acme")]).await,
        "the `x-user` header is missing",
    )
    .await;
    assert_bad_request(
        send(&app, "/", peer, &[("x-user", "alice")]).await,
        "the `x-tenant` header is missing",
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// ClientIp::peer

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
        "the client address is unknown: serve with `into_make_service_with_connect_info::<SocketAddr>()`",
    )
    .await;
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

// ---------------------------------------------------------------------------------------------
// ClientIp::behind_proxies

const PROXY: &str = "10.0.0.1:443";
const CLIENT: &str = "198.51.100.7";

fn behind(header: ForwardedHeader) -> ClientIp {
    ClientIp::behind_proxies(header, ["10.0.0.0/8"]).unwrap()
}

#[tokio::test]
async fn xff_from_an_untrusted_peer_is_ignored() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::XForwardedFor), &store);
    // The attacker connects directly and claims a new address with every request.
    let mut statuses = Vec::new();
    for fake in ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"] {
        let spoof = format!("{fake}, 10.0.0.2");
        statuses.push(
            hit(&app, "203.0.113.66:5000", &[("x-forwarded-for", &spoof)])
                .await
                .0,
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, "203.0.113.66").await, LIMIT);
    assert_eq!(store.len(), 1, "no key was made from a forwarded address");
}

#[tokio::test]
async fn xff_behind_a_trusted_proxy_keys_the_rightmost_untrusted_address() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::XForwardedFor), &store);
    // The client prepends fake entries, a different one every time; the proxy appends the real
    // client address. One limit all the same.
    let chains = [
        CLIENT.to_owned(),
        format!("6.6.6.6, {CLIENT}"),
        format!("7.7.7.7, 8.8.8.8, {CLIENT}"),
        format!("9.9.9.9, {CLIENT}"),
    ];
    let mut statuses = Vec::new();
    for chain in &chains {
        statuses.push(hit(&app, PROXY, &[("x-forwarded-for", chain)]).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, CLIENT).await, LIMIT);
    for fake in ["6.6.6.6", "7.7.7.7", "8.8.8.8", "9.9.9.9", "10.0.0.1"] {
        assert_eq!(used(&store, fake).await, 0, "{fake} was counted");
    }
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn xff_through_two_trusted_proxies_skips_both() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::XForwardedFor), &store);
    // Client -> proxy 10.0.0.2 -> proxy 10.0.0.1 -> us; the client also forged 5.5.5.5 and a
    // private address that would be trusted if it were read.
    let chain = format!("10.9.9.9, 5.5.5.5, {CLIENT}, 10.0.0.2");
    assert_eq!(
        hit(&app, PROXY, &[("x-forwarded-for", &chain)]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, CLIENT).await, 1);
    // A trusted proxy forwarding for itself (every hop trusted): the leftmost hop is the client.
    assert_eq!(
        hit(&app, PROXY, &[("x-forwarded-for", "10.0.0.3, 10.0.0.2")]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, "10.0.0.3").await, 1);
}

#[tokio::test]
async fn xff_lines_are_read_together_as_one_list() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::XForwardedFor), &store);
    // The client sent its own line; the proxy added the real address as a second line. Reading
    // only the first line would key the request by the client's choice.
    let two_lines = [("x-forwarded-for", "1.2.3.4"), ("x-forwarded-for", CLIENT)];
    assert_eq!(hit(&app, PROXY, &two_lines).await, (200, "1".into()));
    // The client's address in the first line, a trusted proxy in the last: reading only the last
    // line would key the request by the proxy.
    let split = [
        ("x-forwarded-for", format!("3.3.3.3, {CLIENT}")),
        ("x-forwarded-for", "10.0.0.2".to_owned()),
    ];
    let split: Vec<(&str, &str)> = split.iter().map(|(n, v)| (*n, v.as_str())).collect();
    assert_eq!(hit(&app, PROXY, &split).await, (200, "2".into()));
    assert_eq!(used(&store, CLIENT).await, 2);
    assert_eq!(used(&store, "1.2.3.4").await, 0);
    assert_eq!(used(&store, "10.0.0.2").await, 0);
}

#[tokio::test]
async fn xff_layer_never_falls_back_to_forwarded() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::XForwardedFor), &store);
    // A trusted proxy that sent only `Forwarded`: the configured header is absent, so the proxy
    // itself is the client; the other header is not read.
    let headers = [("forwarded", "for=1.2.3.4")];
    assert_eq!(hit(&app, PROXY, &headers).await, (200, "1".into()));
    assert_eq!(used(&store, "10.0.0.1").await, 1);
    assert_eq!(used(&store, "1.2.3.4").await, 0);
    // Both present: only X-Forwarded-For counts.
    let both = [("x-forwarded-for", CLIENT), ("forwarded", "for=1.2.3.4")];
    assert_eq!(hit(&app, PROXY, &both).await, (200, "1".into()));
    assert_eq!(used(&store, CLIENT).await, 1);
    assert_eq!(used(&store, "1.2.3.4").await, 0);
}

#[tokio::test]
async fn an_unusable_xff_hop_where_the_client_should_be_is_a_400() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::XForwardedFor), &store);
    for bad in ["unknown", "not-an-ip", "1.2.3.4, garbage", "1.2.3.4,,"] {
        assert_bad_request(
            send(&app, "/", PROXY, &[("x-forwarded-for", bad)]).await,
            "the X-Forwarded-For header names no usable client address",
        )
        .await;
    }
    // Garbage left of the client is never even read.
    let headers = [("x-forwarded-for", "garbage, 198.51.100.7")];
    assert_eq!(hit(&app, PROXY, &headers).await, (200, "1".into()));
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn forwarded_from_an_untrusted_peer_is_ignored() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::Forwarded), &store);
    let mut statuses = Vec::new();
    for fake in ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"] {
        let spoof = format!("for={fake}, for=10.0.0.2");
        statuses.push(
            hit(&app, "203.0.113.66:5000", &[("forwarded", &spoof)])
                .await
                .0,
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, "203.0.113.66").await, LIMIT);
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn forwarded_behind_a_trusted_proxy_keys_the_rightmost_untrusted_address() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::Forwarded), &store);
    let chains = [
        format!("for={CLIENT};proto=https"),
        format!("for=6.6.6.6, for={CLIENT}"),
        format!(r#"for="[2001:db8::66]:1", for="{CLIENT}:4711";by=10.0.0.1"#),
        format!("for=9.9.9.9;host=example.com, For={CLIENT}, for=10.0.0.2"),
    ];
    let mut statuses = Vec::new();
    for chain in &chains {
        statuses.push(hit(&app, PROXY, &[("forwarded", chain)]).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, CLIENT).await, LIMIT);
    assert_eq!(store.len(), 1);
    // A quoted IPv6 client with a port is grouped by its /64.
    let v6 = [("forwarded", r#"for="[2001:db8:cafe::17]:4711""#)];
    assert_eq!(hit(&app, PROXY, &v6).await, (200, "1".into()));
    assert_eq!(used(&store, "2001:db8:cafe::/64").await, 1);
}

#[tokio::test]
async fn forwarded_lines_are_read_together_as_one_list() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::Forwarded), &store);
    let forged = format!("for={CLIENT};proto=http");
    let lines = [("forwarded", "for=1.2.3.4"), ("forwarded", forged.as_str())];
    assert_eq!(hit(&app, PROXY, &lines).await, (200, "1".into()));
    let lines = [
        ("forwarded", forged.as_str()),
        ("forwarded", "for=10.0.0.2"),
    ];
    assert_eq!(hit(&app, PROXY, &lines).await, (200, "2".into()));
    assert_eq!(used(&store, CLIENT).await, 2);
    assert_eq!(used(&store, "1.2.3.4").await, 0);
    assert_eq!(used(&store, "10.0.0.2").await, 0);
}

#[tokio::test]
async fn forwarded_layer_never_falls_back_to_xff() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::Forwarded), &store);
    let headers = [("x-forwarded-for", "1.2.3.4")];
    assert_eq!(hit(&app, PROXY, &headers).await, (200, "1".into()));
    assert_eq!(used(&store, "10.0.0.1").await, 1);
    assert_eq!(used(&store, "1.2.3.4").await, 0);
    let client = format!("for={CLIENT}");
    let both = [
        ("forwarded", client.as_str()),
        ("x-forwarded-for", "1.2.3.4"),
    ];
    assert_eq!(hit(&app, PROXY, &both).await, (200, "1".into()));
    assert_eq!(used(&store, CLIENT).await, 1);
    assert_eq!(used(&store, "1.2.3.4").await, 0);
}

#[tokio::test]
async fn forwarded_with_an_obfuscated_port_keys_the_address() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::Forwarded), &store);
    // RFC 7239 lets a proxy hide the port (`obfport`) and keep the address: the port plays no
    // part in the key, so these are the client, with or without a trusted proxy to its right.
    let chains = [
        format!(r#"for="{CLIENT}:_p1""#),
        format!(r#"for=6.6.6.6, for="{CLIENT}:_a.b-c_9""#),
        format!(r#"for="{CLIENT}:_p1", for="10.0.0.2:_proxy""#),
    ];
    let mut counts = Vec::new();
    for chain in &chains {
        counts.push(hit(&app, PROXY, &[("forwarded", chain)]).await);
    }
    assert_eq!(
        counts,
        [(200, "1".into()), (200, "2".into()), (200, "3".into())]
    );
    assert_eq!(used(&store, CLIENT).await, 3);
    let v6 = [("forwarded", r#"for="[2001:db8:cafe::17]:_x""#)];
    assert_eq!(hit(&app, PROXY, &v6).await, (200, "1".into()));
    assert_eq!(used(&store, "2001:db8:cafe::/64").await, 1);
    assert_eq!(store.len(), 2, "one key for each client, none for 6.6.6.6");
}

#[tokio::test]
async fn an_obfuscated_or_missing_for_where_the_client_should_be_is_a_400() {
    let store = MemoryStore::new();
    let app = app(behind(ForwardedHeader::Forwarded), &store);
    // `unknown`, an obfuscated node name (with or without an obfuscated port), an element
    // without `for`, and an IPv6 address without its brackets. Each stands where the client
    // should be: moving on to the entry further left would hand the key to the client's choice.
    for bad in [
        "for=unknown",
        "for=_hidden",
        r#"for="_hidden:_p1""#,
        r#"for="unknown:_p1""#,
        "for=1.2.3.4, for=_hidden",
        r#"for=1.2.3.4, for="unknown:_p1", for=10.0.0.2"#,
        r#"for=1.2.3.4, for="2001:db8::1:_x""#,
        "for=1.2.3.4, proto=https",
    ] {
        assert_bad_request(
            send(&app, "/", PROXY, &[("forwarded", bad)]).await,
            "the Forwarded header names no usable client address",
        )
        .await;
    }
    assert_eq!(store.len(), 0);
}

// ---------------------------------------------------------------------------------------------
// UserId, GlobalKey, closures, `or`, MissingKey::Skip

/// A stand-in authentication middleware: `authorization: user <id>` becomes a `UserId`.
async fn authenticate(mut request: Request, next: Next) -> axum::response::Response {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("user "))
        .map(|id| UserId::new(id.to_owned()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

#[tokio::test]
async fn user_id_from_an_earlier_axum_middleware_keys_the_request() {
    let store = MemoryStore::new();
    // The last `layer` call is the outermost: authentication runs before the rate limit.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer(UserId::key(), &store))
        .layer(middleware::from_fn(authenticate));
    let alice = [("authorization", "user alice")];
    // One user from several addresses is one client.
    for (index, peer) in ["203.0.113.1:1", "203.0.113.2:1", "198.51.100.3:1"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            hit(&app, peer, &alice).await,
            (200, (index + 1).to_string())
        );
    }
    assert_eq!(hit(&app, "203.0.113.1:1", &alice).await.0, 429);
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("authorization", "user bob")]).await,
        (200, "1".into())
    );
    assert_eq!(used(&store, "alice").await, LIMIT);
    assert_eq!(used(&store, "bob").await, 1);
    assert_bad_request(
        send(&app, "/", "203.0.113.1:1", &[]).await,
        "the request carries no UserId (is the authentication layer in front of the rate limit?)",
    )
    .await;
}

#[tokio::test]
async fn user_id_from_an_earlier_tower_layer_keys_the_request() {
    let store = MemoryStore::new();
    let stack = ServiceBuilder::new()
        .map_request(|mut request: Request| {
            let id = request
                .headers()
                .get("x-session")
                .map(|session| format!("user-of-{}", session.to_str().unwrap()));
            if let Some(id) = id {
                request.extensions_mut().insert(UserId::new(id));
            }
            request
        })
        .layer(layer(UserId::key(), &store));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(stack);
    let session = [("x-session", "s1")];
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(hit(&app, "203.0.113.1:1", &session).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(used(&store, "user-of-s1").await, LIMIT);
}

#[tokio::test]
async fn user_id_inserted_after_the_rate_limit_is_too_late() {
    let store = MemoryStore::new();
    // Wrong order: the rate limit is outermost and never sees the user.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(middleware::from_fn(authenticate))
        .layer(layer(UserId::key(), &store));
    assert_bad_request(
        send(
            &app,
            "/",
            "203.0.113.1:1",
            &[("authorization", "user alice")],
        )
        .await,
        "the request carries no UserId (is the authentication layer in front of the rate limit?)",
    )
    .await;
}

#[tokio::test]
async fn global_key_counts_every_request_against_one_limit() {
    let store = MemoryStore::new();
    let app = app(GlobalKey::new("everyone"), &store);
    let requests: [(&str, &[(&str, &str)]); 4] = [
        ("203.0.113.1:1", &[]),
        ("[2001:db8::1]:1", &[("x-api-key", "k1")]),
        ("198.51.100.9:1", &[("authorization", "user alice")]),
        ("203.0.113.77:1", &[]),
    ];
    let mut results = Vec::new();
    for (peer, headers) in requests {
        results.push(hit(&app, peer, headers).await);
    }
    assert_eq!(
        results,
        [
            (200, "1".into()),
            (200, "2".into()),
            (200, "3".into()),
            (429, "3".into())
        ]
    );
    assert_eq!(used(&store, "everyone").await, LIMIT);
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn a_closure_is_an_extractor_and_its_errors_are_400s() {
    let store = MemoryStore::new();
    // Keys by the `tenant` query parameter.
    let by_tenant = |parts: &Parts| -> Result<Key, KeyError> {
        let query = parts.uri.query().unwrap_or("");
        let tenant = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("tenant="))
            .ok_or_else(|| KeyError::missing("the `tenant` query parameter is missing"))?;
        if tenant.is_empty() || !tenant.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(KeyError::invalid("the `tenant` must be alphanumeric"));
        }
        Ok(Key::from(format!("tenant:{tenant}")))
    };
    let app = app(by_tenant, &store);
    let peer = "203.0.113.1:1";
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(
            send(&app, "/?tenant=acme", peer, &[])
                .await
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(
        send(&app, "/?x=1&tenant=other", peer, &[]).await.status(),
        200
    );
    assert_eq!(used(&store, "tenant:acme").await, LIMIT);
    assert_eq!(used(&store, "tenant:other").await, 1);
    assert_bad_request(
        send(&app, "/", peer, &[]).await,
        "the `tenant` query parameter is missing",
    )
    .await;
    assert_bad_request(
        send(&app, "/?tenant=a.b", peer, &[]).await,
        "the `tenant` must be alphanumeric",
    )
    .await;
}

#[tokio::test]
async fn or_uses_the_api_key_when_there_is_one_and_the_peer_otherwise() {
    let store = MemoryStore::new();
    let app = app(HeaderKey::new("x-api-key").or(ClientIp::peer()), &store);
    // With a key: one limit for the key, from any address.
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("x-api-key", "k1")]).await,
        (200, "1".into())
    );
    assert_eq!(
        hit(&app, "203.0.113.2:1", &[("x-api-key", "k1")]).await,
        (200, "2".into())
    );
    // Without: the address, whose limit is separate from the key's.
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await, (200, "1".into()));
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await, (200, "2".into()));
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await, (200, "3".into()));
    assert_eq!(hit(&app, "203.0.113.1:1", &[]).await.0, 429);
    // A blank key is a missing key: the address again, already exhausted.
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("x-api-key", " ")]).await.0,
        429
    );
    // Still room under the key.
    assert_eq!(
        hit(&app, "203.0.113.1:1", &[("x-api-key", "k1")]).await,
        (200, "3".into())
    );
    assert_eq!(used(&store, "k1").await, LIMIT);
    assert_eq!(used(&store, "203.0.113.1").await, LIMIT);
    assert_eq!(used(&store, "203.0.113.2").await, 0);
    // A repeated key is invalid, not missing: no fallback to a limit of the client's choosing.
    assert_bad_request(
        send(
            &app,
            "/",
            "203.0.113.9:1",
            &[("x-api-key", "k1"), ("x-api-key", "k2")],
        )
        .await,
        "the `x-api-key` header must appear only once",
    )
    .await;
    assert_eq!(used(&store, "203.0.113.9").await, 0);
}

#[tokio::test]
async fn missing_key_skip_passes_without_limit_or_headers() {
    let store = MemoryStore::new();
    let layer = RateLimitLayer::builder()
        .rule(rule())
        .key(HeaderKey::new("x-api-key"))
        .store(store.clone())
        .on_missing_key(MissingKey::Skip)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    // Without a key: never limited, no rate-limit headers at all.
    for _ in 0..(LIMIT * 3) {
        let response = send(&app, "/", "203.0.113.1:1", &[]).await;
        assert_eq!(response.status(), 200);
        let names: Vec<String> = response
            .headers()
            .keys()
            .map(|name| name.as_str().to_owned())
            .collect();
        for name in &names {
            assert!(
                !name.contains("rate") && name != "retry-after",
                "unexpected header {name} on a skipped request"
            );
        }
        assert_eq!(text(response).await, "ok");
    }
    assert_eq!(store.len(), 0);
    // With a key: limited as usual.
    let mut statuses = Vec::new();
    for _ in 0..=LIMIT {
        statuses.push(hit(&app, "203.0.113.1:1", &[("x-api-key", "k1")]).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    // An invalid key is not a missing one and is not skipped: otherwise the exhausted client
    // would send its key twice (a handler reading the first value still authenticates it) and
    // pass unlimited.
    for _ in 0..LIMIT {
        assert_bad_request(
            send(
                &app,
                "/",
                "203.0.113.1:1",
                &[("x-api-key", "k1"), ("x-api-key", "k1")],
            )
            .await,
            "the `x-api-key` header must appear only once",
        )
        .await;
    }
    assert_eq!(used(&store, "k1").await, LIMIT);
}
