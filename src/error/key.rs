//! [`KeyConfigError`]: what is wrong with a key extractor's settings.

/// A key extractor setting is invalid.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyConfigError {
    /// A header name HTTP does not allow.
    #[error("{name:?} is not a valid header name: use letters, digits and '-'")]
    InvalidHeaderName {
        /// The name refused.
        name: String,
    },
    /// A network that is neither a CIDR nor an address.
    #[error(
        "{network:?} is neither an IP network (CIDR) nor an IP address: write e.g. \"10.0.0.0/8\" or \"192.0.2.1\""
    )]
    InvalidNetwork {
        /// The text refused.
        network: String,
    },
    /// A key in a configuration file that names no way of finding one.
    #[error("names no key: set one of header, headers, client_ip, user_id, global")]
    NoKey,
    /// A key in a configuration file that names several.
    #[error("names several keys ({}): set one, and `or` for a second", keys.join(", "))]
    SeveralKeys {
        /// The keys named.
        keys: Vec<&'static str>,
    },
    /// An empty list of headers, or an empty global key name.
    #[error("is empty: name at least one")]
    Empty,
    /// `user_id = false`.
    #[error("is false: leave it out instead")]
    UserIdFalse,
    /// A forwarded header other than `x-forwarded-for` and `forwarded`.
    #[error("is {header:?}: use \"x-forwarded-for\" or \"forwarded\"")]
    UnknownForwardedHeader {
        /// The header refused.
        header: String,
    },
    /// A forwarded header without proxies to trust.
    #[error(
        "is set without trusted_proxies: a forwarded header is only read from proxies you trust"
    )]
    ForwardedWithoutProxies,
    /// Allow or deny networks on a layer whose key is no client address, with no
    /// [`ClientIp`](crate::key::ClientIp) to find one
    /// ([`Exemptions::client_ip`](crate::key::Exemptions::client_ip)).
    #[error(
        "allow and deny networks match the client's address, which this key does not read: say \
         how to find it with `Exemptions::client_ip` (in a configuration file, the route's \
         `client_ip`): the TCP peer, or the address your trusted proxies forward"
    )]
    NetworksWithoutClientIp,
    /// A configuration file's `client_ip` on a route that lists no network.
    #[error("is set, but the route lists no allow or deny network that would use it: remove it")]
    ClientIpWithoutNetworks,
    /// A prefix length that does not fit the address family.
    #[error("is {len}: use 1 to {max}")]
    PrefixOutOfRange {
        /// The length refused.
        len: u8,
        /// The longest prefix of the family (32 or 128).
        max: u8,
    },
}
