//! `ClientIp::behind_proxies`: behind trusted proxies, the rightmost untrusted address of
//! `X-Forwarded-For` or `Forwarded` (only the configured one) is the key; from an untrusted peer the
//! header is ignored, and an unusable hop where the client should be is a 400.

use super::{LIMIT, app, assert_bad_request, hit, used};
use crate::support::get as send;
use tower_redis_ratelimit::MemoryStore;
use tower_redis_ratelimit::key::{ClientIp, ForwardedHeader};

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
