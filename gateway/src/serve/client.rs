//! Who the client is: the address a trusted gateway names, read by the library's
//! [`ClientIp`] (the rightmost address that is not a gateway's), never what an untrusted
//! caller writes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use http::request::Parts;
use http::{HeaderName, Request};
use tower_redis_ratelimit::key::{ClientIp, ForwardedHeader, KeyError};

use crate::config::{DEFAULT_GATEWAYS, FieldError, ServeConfig};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Where a Unix socket's peer stands in [`ClientIp`]'s eyes: an address no TCP peer has,
/// trusted, since whoever can open the socket is a gateway (a sidecar's neighbour).
const UNIX_PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// The gateways whose word on the client is taken, and the header they say it in.
#[derive(Clone, Debug)]
pub(crate) struct Gateways {
    /// For TCP peers: the `gateways` networks.
    tcp: ClientIp,
    /// For a Unix socket's peers: the same, and [`UNIX_PEER`].
    unix: ClientIp,
    /// A header of one address (`x-real-ip`), read as an `X-Forwarded-For` of one entry; none
    /// for `x-forwarded-for` and `forwarded`, which [`ClientIp`] reads itself.
    single: Option<HeaderName>,
}

impl Gateways {
    pub(crate) fn new(table: &ServeConfig) -> Result<Self, FieldError> {
        let networks: Vec<String> = match &table.gateways {
            Some(networks) => networks.clone(),
            None => DEFAULT_GATEWAYS.map(str::to_owned).to_vec(),
        };
        let (header, single) = match table.client_header.as_deref() {
            None | Some("x-forwarded-for") => (ForwardedHeader::XForwardedFor, None),
            Some("forwarded") => (ForwardedHeader::Forwarded, None),
            Some(name) => {
                let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    FieldError::new(
                        "serve.client_header",
                        format!("{name:?} is not a header name"),
                    )
                })?;
                (ForwardedHeader::XForwardedFor, Some(name))
            }
        };
        let trusted = |extra: Option<&str>| {
            ClientIp::behind_proxies(header, networks.iter().map(String::as_str).chain(extra))
        };
        let tcp = trusted(None).map_err(|err| {
            FieldError::new(
                "serve.gateways",
                format!("{err} (write e.g. \"10.0.0.0/8\")"),
            )
        })?;
        let unix = trusted(Some("0.0.0.0/32"))
            .map_err(|err| FieldError::new("serve.gateways", err.to_string()))?;
        Ok(Gateways { tcp, unix, single })
    }

    /// The client of the request a gateway asks about: the caller itself unless it is a
    /// trusted gateway, else the address the gateway names. `parts` are the gateway's request,
    /// with the caller's TCP address in its extensions (none on a Unix socket).
    pub(crate) fn client(&self, parts: &Parts) -> Result<IpAddr, KeyError> {
        let tcp = parts.extensions.get::<SocketAddr>().is_some();
        if tcp && self.single.is_none() {
            return self.tcp.client_addr(parts);
        }
        // The header of one address as the one X-Forwarded-For line, or the Unix peer's stand-in.
        let mut asked = Request::new(());
        let headers = asked.headers_mut();
        match &self.single {
            Some(name) => {
                for value in parts.headers.get_all(name) {
                    headers.append(X_FORWARDED_FOR, value.clone());
                }
            }
            None => headers.clone_from(&parts.headers),
        }
        let (extractor, peer) = match parts.extensions.get::<SocketAddr>() {
            Some(peer) => (&self.tcp, *peer),
            None => (&self.unix, UNIX_PEER),
        };
        asked.extensions_mut().insert(peer);
        extractor.client_addr(&asked.into_parts().0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateways(toml: &str) -> Gateways {
        let file: crate::config::Tables = tower_redis_ratelimit::config::ConfigFile::parse(
            &format!("[serve]\nlisten = \"127.0.0.1:1\"\n{toml}"),
            tower_redis_ratelimit::config::Format::Toml,
        )
        .unwrap()
        .tables;
        Gateways::new(&file.serve.unwrap()).unwrap()
    }

    /// A question from `peer` (none: a Unix socket) with `headers`.
    fn asked(peer: Option<&str>, headers: &[(&str, &str)]) -> Parts {
        let mut request = Request::new(());
        for (name, value) in headers {
            request.headers_mut().append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        if let Some(peer) = peer {
            request
                .extensions_mut()
                .insert(peer.parse::<SocketAddr>().unwrap());
        }
        request.into_parts().0
    }

    fn client(gateways: &Gateways, peer: Option<&str>, headers: &[(&str, &str)]) -> String {
        gateways.client(&asked(peer, headers)).unwrap().to_string()
    }

    #[test]
    fn loopback_gateways_by_default_and_the_unix_socket_always() {
        let gateways = gateways("");
        let forwarded = [("x-forwarded-for", "6.6.6.6, 203.0.113.7")];
        assert_eq!(
            client(&gateways, Some("127.0.0.1:5000"), &forwarded),
            "203.0.113.7"
        );
        assert_eq!(
            client(&gateways, Some("[::1]:5000"), &forwarded),
            "203.0.113.7"
        );
        assert_eq!(client(&gateways, None, &forwarded), "203.0.113.7");
        // Not a gateway: the caller is the client.
        assert_eq!(
            client(&gateways, Some("198.51.100.1:5000"), &forwarded),
            "198.51.100.1"
        );
        // A gateway that names no client is the client.
        assert_eq!(client(&gateways, Some("127.0.0.1:5000"), &[]), "127.0.0.1");
    }

    #[test]
    fn rfc_7239_forwarded_and_a_header_of_one_address() {
        let forwarded = gateways("client_header = \"forwarded\"");
        let headers = [
            ("forwarded", "for=6.6.6.6, for=\"[2001:db8::7]:4711\""),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(
            client(&forwarded, Some("127.0.0.1:1"), &headers),
            "2001:db8::7"
        );
        assert_eq!(client(&forwarded, None, &headers), "2001:db8::7");

        let real_ip = gateways("client_header = \"x-real-ip\"\ngateways = [\"10.0.0.0/8\"]");
        let headers = [("x-real-ip", "203.0.113.8"), ("x-forwarded-for", "6.6.6.6")];
        assert_eq!(
            client(&real_ip, Some("10.1.2.3:1"), &headers),
            "203.0.113.8"
        );
        assert_eq!(client(&real_ip, None, &headers), "203.0.113.8");
        // Loopback is no gateway here: the caller is the client.
        assert_eq!(client(&real_ip, Some("127.0.0.1:1"), &headers), "127.0.0.1");
        // Garbage from a gateway is an error, not a key.
        let garbage = asked(Some("10.1.2.3:1"), &[("x-real-ip", "somewhere")]);
        assert!(real_ip.client(&garbage).is_err());
    }
}
