//! Who the client is: the address a trusted gateway names, read by the library's
//! [`ClientIp`] (the rightmost address that is not a gateway's), never what an untrusted
//! caller writes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use http::request::Parts;
use http::{HeaderName, Request};
use tower_redis_ratelimit::key::{ClientIp, ForwardedHeader, KeyError};

use crate::config::{DEFAULT_GATEWAYS, FieldError, ServeTable};

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
    pub(crate) fn new(table: &ServeTable) -> Result<Self, FieldError> {
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
