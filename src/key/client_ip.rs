//! Keys by client address, correct behind trusted proxies and never spoofable.

use std::net::{IpAddr, SocketAddr};

#[cfg(feature = "axum")]
use axum::extract::{ConnectInfo, connect_info::MockConnectInfo};
use http::header::{FORWARDED, HeaderName};
use http::request::Parts;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::forwarded::{self, Hops};
use super::{Key, KeyError, KeyExtractor};
use crate::error::{ConfigError, KeyConfigError};

/// Which header trusted proxies use to say whom they forward for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`.
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    Forwarded,
}

impl ForwardedHeader {
    fn hops(self, parts: &Parts) -> Hops {
        match self {
            ForwardedHeader::XForwardedFor => {
                forwarded::x_forwarded_for(parts.headers.get_all(X_FORWARDED_FOR).iter())
            }
            ForwardedHeader::Forwarded => {
                forwarded::forwarded(parts.headers.get_all(FORWARDED).iter())
            }
        }
    }
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Keys a request by its client's IP address.
///
/// - The client is the TCP peer. With axum (feature `axum`), serve with
///   `into_make_service_with_connect_info::<SocketAddr>()` (in tests, axum's `MockConnectInfo`
///   layer also works). Any other server (hyper, tonic, your own accept loop) puts the peer's
///   [`SocketAddr`] into the request extensions: `request.extensions_mut().insert(peer)`.
/// - Only when the peer is a configured trusted proxy is the forwarding header read: all its lines
///   as one list, from the right, skipping trusted proxies; the first untrusted address is the
///   client. Everything left of it was written by the client and is ignored, so a client cannot
///   choose its own key. When every hop is trusted, the leftmost one is the client. Only the one
///   configured header is read; there is no fallback from one header to another.
/// - A hop that names no usable address (`unknown`, an obfuscated node name like `_hidden`,
///   garbage) where an address is needed makes the key [invalid](super::KeyErrorKind::Invalid).
///   An address whose port alone is obfuscated (RFC 7239: `for="192.0.2.43:_p1"`) is usable.
/// - IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) count as their IPv4 address.
/// - IPv6 clients are grouped by prefix, /64 by default (one subscriber's allocation), so rotating
///   through the addresses of one network does not escape the limit.
///
/// ```
/// use std::net::SocketAddr;
/// use tower_redis_ratelimit::key::{ClientIp, ForwardedHeader, KeyExtractor};
///
/// let key = ClientIp::behind_proxies(ForwardedHeader::XForwardedFor, ["10.0.0.0/8"])?;
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.0.0.2")
///     .body(())
///     .unwrap();
/// request.extensions_mut().insert("10.0.0.1:443".parse::<SocketAddr>().unwrap());
/// assert_eq!(key.extract(&request.into_parts().0).unwrap().to_string(), "203.0.113.9");
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClientIp {
    trusted: Vec<IpNet>,
    header: ForwardedHeader,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
}

impl ClientIp {
    /// The TCP peer is the client; no forwarding header is ever read.
    pub fn peer() -> Self {
        Self {
            trusted: Vec::new(),
            header: ForwardedHeader::XForwardedFor,
            ipv4_prefix: 32,
            ipv6_prefix: 64,
        }
    }

    /// Behind proxies in the given networks (CIDRs like `10.0.0.0/8`, or single addresses), which
    /// report clients in `header`.
    pub fn behind_proxies<'a>(
        header: ForwardedHeader,
        trusted: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, ConfigError> {
        let trusted = trusted
            .into_iter()
            .map(parse_network)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::behind(header, trusted))
    }

    /// Behind proxies in the given networks, which report clients in `header`.
    pub fn behind(header: ForwardedHeader, trusted: impl IntoIterator<Item = IpNet>) -> Self {
        Self {
            trusted: trusted.into_iter().map(|net| net.trunc()).collect(),
            header,
            ..Self::peer()
        }
    }

    /// Groups IPv6 clients by this prefix length (default 64; 128 keys each address on its own).
    /// Lengths above 128 mean 128.
    pub fn ipv6_prefix(mut self, len: u8) -> Self {
        self.ipv6_prefix = len.min(128);
        self
    }

    /// Groups IPv4 clients by this prefix length (default 32: each address on its own; 24 groups a
    /// /24 network). Lengths above 32 mean 32.
    pub fn ipv4_prefix(mut self, len: u8) -> Self {
        self.ipv4_prefix = len.min(32);
        self
    }

    /// The client address of a request, before grouping.
    pub fn client_addr(&self, parts: &Parts) -> Result<IpAddr, KeyError> {
        let Some(peer) = peer_addr(parts) else {
            return Err(KeyError::missing(
                "the client address is unknown: serve with `into_make_service_with_connect_info::<SocketAddr>()` \
                 (axum), or put the peer's `SocketAddr` into the request extensions",
            ));
        };
        let mut client = peer.ip().to_canonical();
        if !self.is_trusted(client) {
            return Ok(client);
        }
        for hop in self.header.hops(parts).into_iter().rev() {
            let Some(address) = hop else {
                return Err(KeyError::invalid(format!(
                    "the {} header names no usable client address",
                    header_name(self.header)
                )));
            };
            client = address.to_canonical();
            if !self.is_trusted(client) {
                break;
            }
        }
        Ok(client)
    }

    fn is_trusted(&self, address: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&address))
    }

    fn group(&self, address: IpAddr) -> Key {
        let text = match address {
            IpAddr::V4(v4) if self.ipv4_prefix == 32 => v4.to_string(),
            IpAddr::V4(v4) => Ipv4Net::new_assert(v4, self.ipv4_prefix)
                .trunc()
                .to_string(),
            IpAddr::V6(v6) if self.ipv6_prefix == 128 => v6.to_string(),
            IpAddr::V6(v6) => Ipv6Net::new_assert(v6, self.ipv6_prefix)
                .trunc()
                .to_string(),
        };
        Key::from(text)
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        self.client_addr(parts).map(|address| self.group(address))
    }

    fn client_ip(&self) -> Option<&ClientIp> {
        Some(self)
    }
}

/// The TCP peer: axum's connect info, or a `SocketAddr` any server put into the extensions.
fn peer_addr(parts: &Parts) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    {
        // Without a real connection, axum's `MockConnectInfo` layer stands in for it (tests do
        // this); axum's own `ConnectInfo` extractor falls back to it the same way.
        if let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            return Some(*peer);
        }
        if let Some(MockConnectInfo(peer)) = parts.extensions.get::<MockConnectInfo<SocketAddr>>() {
            return Some(*peer);
        }
    }
    parts.extensions.get::<SocketAddr>().copied()
}

fn header_name(header: ForwardedHeader) -> &'static str {
    match header {
        ForwardedHeader::XForwardedFor => "X-Forwarded-For",
        ForwardedHeader::Forwarded => "Forwarded",
    }
}

pub(crate) fn parse_network(text: &str) -> Result<IpNet, ConfigError> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            KeyConfigError::InvalidNetwork {
                network: text.to_owned(),
            }
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyErrorKind;

    fn request(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut parts = crate::key::test_support::parts(headers);
        parts.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        parts
    }

    fn key(extractor: &ClientIp, peer: &str, headers: &[(&str, &str)]) -> String {
        extractor
            .extract(&request(peer, headers))
            .unwrap()
            .to_string()
    }

    fn proxies() -> ClientIp {
        ClientIp::behind_proxies(
            ForwardedHeader::XForwardedFor,
            ["10.0.0.0/8", "192.168.1.1"],
        )
        .unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let headers = [("x-forwarded-for", "1.2.3.4"), ("forwarded", "for=1.2.3.4")];
        assert_eq!(
            key(&ClientIp::peer(), "203.0.113.5:1000", &headers),
            "203.0.113.5"
        );
        assert_eq!(key(&proxies(), "203.0.113.5:1000", &headers), "203.0.113.5");
    }

    #[test]
    fn behind_proxies_the_rightmost_untrusted_hop_is_the_client() {
        let chain = [
            ("x-forwarded-for", "6.6.6.6, 7.7.7.7"),
            ("x-forwarded-for", "203.0.113.9, 10.1.1.1"),
        ];
        assert_eq!(key(&proxies(), "10.0.0.1:443", &chain), "203.0.113.9");
        assert_eq!(
            key(
                &proxies(),
                "192.168.1.1:443",
                &[("x-forwarded-for", "8.8.8.8")]
            ),
            "8.8.8.8"
        );
    }

    #[test]
    fn a_trusted_peer_without_the_header_is_itself_the_client() {
        assert_eq!(key(&proxies(), "10.0.0.1:443", &[]), "10.0.0.1");
        assert_eq!(
            key(
                &proxies(),
                "10.0.0.1:443",
                &[("x-forwarded-for", "10.2.2.2")]
            ),
            "10.2.2.2"
        );
    }

    #[test]
    fn there_is_no_fallback_from_one_header_to_another() {
        let spoof = [("forwarded", "for=1.2.3.4")];
        assert_eq!(key(&proxies(), "10.0.0.1:443", &spoof), "10.0.0.1");
    }

    #[test]
    fn an_unusable_hop_where_an_address_is_needed_is_invalid() {
        let err = proxies()
            .extract(&request("10.0.0.1:443", &[("x-forwarded-for", "unknown")]))
            .unwrap_err();
        assert_eq!(err.kind(), KeyErrorKind::Invalid);
        // Garbage left of the client is never read.
        assert_eq!(
            key(
                &proxies(),
                "10.0.0.1:443",
                &[("x-forwarded-for", "garbage, 203.0.113.9")]
            ),
            "203.0.113.9"
        );
    }

    #[test]
    fn forwarded_header_is_read_when_configured() {
        let extractor =
            ClientIp::behind_proxies(ForwardedHeader::Forwarded, ["10.0.0.0/8"]).unwrap();
        let headers = [(
            "forwarded",
            r#"for=6.6.6.6, for="[2001:db8::1]:80";proto=https, for=10.0.0.7"#,
        )];
        assert_eq!(key(&extractor, "10.0.0.1:443", &headers), "2001:db8::/64");
        let hidden = [("forwarded", "for=_hidden")];
        assert_eq!(
            extractor
                .extract(&request("10.0.0.1:443", &hidden))
                .unwrap_err()
                .kind(),
            KeyErrorKind::Invalid
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_canonical_and_ipv6_is_grouped() {
        assert_eq!(
            key(&ClientIp::peer(), "[::ffff:203.0.113.5]:1", &[]),
            "203.0.113.5"
        );
        assert_eq!(
            key(&ClientIp::peer(), "[2001:db8:1:2:3:4:5:6]:1", &[]),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            key(
                &ClientIp::peer().ipv6_prefix(48),
                "[2001:db8:1:2::6]:1",
                &[]
            ),
            "2001:db8:1::/48"
        );
        assert_eq!(
            key(&ClientIp::peer().ipv6_prefix(200), "[2001:db8::6]:1", &[]),
            "2001:db8::6"
        );
        assert_eq!(
            key(&ClientIp::peer().ipv4_prefix(24), "203.0.113.5:1", &[]),
            "203.0.113.0/24"
        );
        // A mapped trusted proxy is trusted as its IPv4 address.
        assert_eq!(
            key(
                &proxies(),
                "[::ffff:10.0.0.1]:1",
                &[("x-forwarded-for", "::ffff:8.8.4.4")]
            ),
            "8.8.4.4"
        );
    }

    #[cfg(feature = "axum")]
    #[test]
    fn axum_connect_info_names_the_peer() {
        let mut parts = crate::key::test_support::parts(&[]);
        let peer: SocketAddr = "203.0.113.5:1000".parse().unwrap();
        parts.extensions.insert(ConnectInfo(peer));
        assert_eq!(
            ClientIp::peer().extract(&parts).unwrap().to_string(),
            "203.0.113.5"
        );
        let mut parts = crate::key::test_support::parts(&[]);
        parts.extensions.insert(MockConnectInfo(peer));
        assert_eq!(
            ClientIp::peer().extract(&parts).unwrap().to_string(),
            "203.0.113.5"
        );
    }

    #[test]
    fn a_request_without_peer_address_has_no_key() {
        let parts = crate::key::test_support::parts(&[]);
        assert_eq!(
            ClientIp::peer().extract(&parts).unwrap_err().kind(),
            KeyErrorKind::Missing
        );
    }

    #[test]
    fn bad_networks_are_configuration_errors() {
        assert!(ClientIp::behind_proxies(ForwardedHeader::Forwarded, ["10.0.0.0/33"]).is_err());
        assert!(ClientIp::behind_proxies(ForwardedHeader::Forwarded, ["proxy.local"]).is_err());
    }
}
