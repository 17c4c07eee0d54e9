//! The headers a proxy adds and removes: forwarding headers in, hop-by-hop headers out.

use std::net::IpAddr;

use http::header::{CONNECTION, HeaderName, UPGRADE};
use http::{HeaderMap, HeaderValue, Request};

/// Headers about one connection, not the message: never forwarded (RFC 9110, 7.6.1), except
/// `Connection` and `Upgrade` on an upgrade.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
];

pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
pub(crate) const FORWARDED: HeaderName = HeaderName::from_static("forwarded");

/// Whether `request` asks to switch protocols (a WebSocket).
pub(crate) fn is_upgrade<B>(request: &Request<B>) -> bool {
    request.headers().contains_key(UPGRADE) && names_token(request.headers(), CONNECTION, "upgrade")
}

/// Whether `request` upgrades to a WebSocket.
pub(crate) fn is_websocket<B>(request: &Request<B>) -> bool {
    names_token(request.headers(), UPGRADE, "websocket")
}

fn names_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| {
            value
                .split(',')
                .any(|item| item.trim().eq_ignore_ascii_case(token))
        })
}

/// Adds the client's address to `X-Forwarded-For` and `Forwarded`, and says how the client
/// asked: `X-Forwarded-Proto` (`http` or `https`) and `X-Forwarded-Host` (the host it named),
/// replacing what the client sent of these two.
pub(crate) fn add_forwarding(
    headers: &mut HeaderMap,
    peer: Option<IpAddr>,
    proto: &'static str,
    host: Option<HeaderValue>,
) {
    if let Some(peer) = peer {
        let address = peer.to_string();
        append(headers, X_FORWARDED_FOR, &address, ", ");
        let node = match peer {
            IpAddr::V4(_) => address,
            IpAddr::V6(_) => format!("\"[{address}]\""),
        };
        append(
            headers,
            FORWARDED,
            &format!("for={node};proto={proto}"),
            ", ",
        );
    }
    headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto));
    match host {
        Some(host) => {
            headers.insert(X_FORWARDED_HOST, host);
        }
        None => {
            headers.remove(X_FORWARDED_HOST);
        }
    }
}

/// Sets `name` to its values so far (all its lines, in order) followed by `value`.
fn append(headers: &mut HeaderMap, name: HeaderName, value: &str, separator: &str) {
    let mut joined = String::new();
    for existing in headers.get_all(&name) {
        if let Ok(existing) = existing.to_str() {
            joined.push_str(existing);
            joined.push_str(separator);
        }
    }
    joined.push_str(value);
    if let Ok(joined) = HeaderValue::from_str(&joined) {
        headers.insert(name, joined);
    }
}

/// Removes the hop-by-hop headers (and those `Connection` names), keeping `Connection` and
/// `Upgrade` on an upgrade.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    if headers.contains_key(CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
            .filter(|name| !(upgrade && *name == UPGRADE))
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in HOP_BY_HOP {
        if upgrade && name == "connection" {
            continue;
        }
        headers.remove(name);
    }
    if !upgrade {
        headers.remove(UPGRADE);
    }
}
