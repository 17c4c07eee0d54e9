//! [`Exemptions`]: keys and networks a keyed layer lets through unchecked, or refuses outright.

use std::collections::HashSet;

use http::request::Parts;
use ipnet::IpNet;

use super::client_ip::parse_network;
use super::{ClientIp, Key, KeyExtractor};
use crate::error::{ConfigError, KeyConfigError};

/// Allow and deny lists for a keyed layer
/// ([`RateLimitLayerBuilder::exemptions`](crate::rate::RateLimitLayerBuilder::exemptions)): a
/// request on the allow list passes unchecked (no store call, no rate-limit headers); one on the
/// deny list is refused with 403 Forbidden; the deny list wins when a request is on both. Every
/// other request is limited as usual.
///
/// - Keys match the request's key, as the layer's key extractor makes it (an API key, or for
///   [`ClientIp`] the address or network it groups the client into, `2001:db8:1:2::/64`).
/// - Networks (CIDRs, or single addresses) match the request's client address, whatever its key:
///   the address a [`ClientIp`] finds, the TCP peer or, behind trusted proxies, the address they
///   forwarded (never one a client can choose). A layer keyed by client address finds it with its
///   own key extractor (a [`ClientIp`], or an [`or`](super::KeyExtractorExt::or) with one); any
///   other layer that lists networks must say how with [`client_ip`](Self::client_ip), or its
///   `build()` fails. A request whose client address cannot be found matches no network.
///
/// ```
/// use tower_redis_ratelimit::key::{ClientIp, Exemptions, ForwardedHeader};
///
/// // On a layer keyed by client address, as its key extractor finds it:
/// let exemptions = Exemptions::new()
///     .allow_key("internal-batch-job")
///     .allow_networks(["10.0.0.0/8", "2001:db8::/32"])
///     .deny_networks(["203.0.113.0/24"]);
/// // On a layer keyed by API key, behind a load balancer at 10.0.0.0/8:
/// let exemptions = Exemptions::new()
///     .deny_networks(["203.0.113.0/24"])
///     .client_ip(ClientIp::behind_proxies(ForwardedHeader::XForwardedFor, ["10.0.0.0/8"])?);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
///
/// A network that does not parse is reported by the layer's `build()` (or by
/// [`validate`](Self::validate)), like every other setting.
#[derive(Clone, Debug, Default)]
pub struct Exemptions {
    allow_keys: HashSet<Key>,
    deny_keys: HashSet<Key>,
    allow_networks: Vec<IpNet>,
    deny_networks: Vec<IpNet>,
    /// How networks find a request's client address: given, or the layer's key extractor's.
    client: Option<ClientIp>,
    /// The first network given that is neither a CIDR nor an address, kept for `validate`.
    invalid: Option<ConfigError>,
}

/// What the lists say about a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listed {
    Allowed,
    Denied,
    Neither,
}

impl Exemptions {
    /// Empty lists.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets requests with this key through unchecked.
    pub fn allow_key(mut self, key: impl Into<Key>) -> Self {
        self.allow_keys.insert(key.into());
        self
    }

    /// Refuses requests with this key (403).
    pub fn deny_key(mut self, key: impl Into<Key>) -> Self {
        self.deny_keys.insert(key.into());
        self
    }

    /// Lets requests from these networks (CIDRs or addresses) through unchecked.
    pub fn allow_networks<'a>(mut self, networks: impl IntoIterator<Item = &'a str>) -> Self {
        for network in networks {
            if let Some(network) = self.parse(network) {
                self.allow_networks.push(network);
            }
        }
        self
    }

    /// Refuses requests from these networks (CIDRs or addresses) with 403.
    pub fn deny_networks<'a>(mut self, networks: impl IntoIterator<Item = &'a str>) -> Self {
        for network in networks {
            if let Some(network) = self.parse(network) {
                self.deny_networks.push(network);
            }
        }
        self
    }

    /// How the networks find a request's client address, for a layer whose key is not one (an
    /// API key, a user id): [`ClientIp::peer()`] when clients connect directly, or
    /// [`ClientIp::behind_proxies`] naming the proxies in front of the service, as for a key.
    /// Without it, a layer keyed by client address uses its own key extractor.
    pub fn client_ip(mut self, client: ClientIp) -> Self {
        self.client = Some(client);
        self
    }

    /// `text` as a network, or `None` with the error kept for [`validate`](Self::validate).
    fn parse(&mut self, text: &str) -> Option<IpNet> {
        match parse_network(text) {
            Ok(network) => Some(network.trunc()),
            Err(err) => {
                self.invalid.get_or_insert(err);
                None
            }
        }
    }

    /// The first network given that is neither a CIDR nor an address, as the error a layer's
    /// `build()` returns for these lists.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.invalid.clone().map_or(Ok(()), Err)
    }

    /// Whether the lists hold nothing.
    pub fn is_empty(&self) -> bool {
        self.allow_keys.is_empty()
            && self.deny_keys.is_empty()
            && self.allow_networks.is_empty()
            && self.deny_networks.is_empty()
    }

    /// Ready for a layer keyed by `key`: the networks find client addresses as the lists were
    /// told, or else as `key` does; an error when they have no way to.
    pub(crate) fn find_clients_with(&mut self, key: &dyn KeyExtractor) -> Result<(), ConfigError> {
        if self.allow_networks.is_empty() && self.deny_networks.is_empty() || self.client.is_some()
        {
            return Ok(());
        }
        self.client = Some(
            key.client_ip()
                .cloned()
                .ok_or(KeyConfigError::NetworksWithoutClientIp)?,
        );
        Ok(())
    }

    /// What the lists say about a request with `key` and head `parts`.
    pub(crate) fn listed(&self, key: &Key, parts: &Parts) -> Listed {
        let address = if self.allow_networks.is_empty() && self.deny_networks.is_empty() {
            None
        } else {
            // An address that cannot be found (no peer, a forwarded hop that names none) is in
            // no network; for a layer keyed by it, the key is missing or invalid too.
            self.client
                .as_ref()
                .and_then(|client| client.client_addr(parts).ok())
        };
        let within = |networks: &[IpNet]| {
            address.is_some_and(|address| networks.iter().any(|network| network.contains(&address)))
        };
        if self.deny_keys.contains(key) || within(&self.deny_networks) {
            Listed::Denied
        } else if self.allow_keys.contains(key) || within(&self.allow_networks) {
            Listed::Allowed
        } else {
            Listed::Neither
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::key::{ForwardedHeader, HeaderKey, KeyExtractorExt};

    /// A request from `peer` with the given headers.
    fn from(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut parts = crate::key::test_support::parts(headers);
        parts.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        parts
    }

    /// `lists` made ready for a layer keyed by `key`.
    fn ready(mut lists: Exemptions, key: &dyn KeyExtractor) -> Exemptions {
        lists.validate().unwrap();
        lists.find_clients_with(key).unwrap();
        lists
    }

    #[test]
    fn keys_and_networks_are_allowed_or_denied_and_denial_wins() {
        let lists = ready(
            Exemptions::new()
                .allow_key("batch")
                .deny_key("abuser")
                .allow_networks(["10.0.0.0/8", "2001:db8::/32"])
                .deny_networks(["10.6.6.0/24", "192.0.2.7"]),
            &ClientIp::peer(),
        );
        let listed = |key: &str, peer: &str| lists.listed(&Key::from(key), &from(peer, &[]));
        assert_eq!(listed("batch", "203.0.113.1:1"), Listed::Allowed);
        assert_eq!(listed("abuser", "10.1.2.3:1"), Listed::Denied);
        assert_eq!(listed("10.1.2.3", "10.1.2.3:1"), Listed::Allowed);
        assert_eq!(listed("10.6.6.9", "10.6.6.9:1"), Listed::Denied);
        assert_eq!(listed("192.0.2.7", "192.0.2.7:1"), Listed::Denied);
        assert_eq!(listed("192.0.2.8", "192.0.2.8:1"), Listed::Neither);
        // An IPv6 client, keyed by its /64, is matched by its own address.
        assert_eq!(
            listed("2001:db8:1:2::/64", "[2001:db8:1:2::9]:1"),
            Listed::Allowed
        );
        let narrow = ready(
            Exemptions::new().allow_networks(["2001:db8:1:2::9"]),
            &ClientIp::peer(),
        );
        let key = Key::from("2001:db8:1:2::/64");
        assert_eq!(
            narrow.listed(&key, &from("[2001:db8:1:2::9]:1", &[])),
            Listed::Allowed
        );
        assert_eq!(
            narrow.listed(&key, &from("[2001:db8:1:2::8]:1", &[])),
            Listed::Neither
        );
        // No peer address: no network matches.
        let nowhere = crate::key::test_support::parts(&[]);
        assert_eq!(
            lists.listed(&Key::from("10.1.2.3"), &nowhere),
            Listed::Neither
        );
    }

    #[test]
    fn networks_match_the_client_address_whatever_the_key() {
        let behind =
            ClientIp::behind_proxies(ForwardedHeader::XForwardedFor, ["10.0.0.0/8"]).unwrap();
        let lists = ready(
            Exemptions::new()
                .allow_networks(["192.168.0.0/16"])
                .deny_networks(["203.0.113.0/24"])
                .client_ip(behind),
            &HeaderKey::new("x-api-key"),
        );
        let key = Key::from("some-api-key");
        let listed = |peer: &str, forwarded: &str| {
            lists.listed(&key, &from(peer, &[("x-forwarded-for", forwarded)]))
        };
        // Through the load balancer: the forwarded address, not the balancer's.
        assert_eq!(listed("10.0.0.5:443", "203.0.113.9"), Listed::Denied);
        assert_eq!(listed("10.0.0.5:443", "192.168.1.1"), Listed::Allowed);
        assert_eq!(listed("10.0.0.5:443", "198.51.100.1"), Listed::Neither);
        // A client cannot choose its address: what it forwards itself is not read.
        assert_eq!(listed("198.51.100.1:443", "192.168.1.1"), Listed::Neither);
        assert_eq!(
            listed("10.0.0.5:443", "192.168.1.1, 203.0.113.9"),
            Listed::Denied
        );

        // A key that falls back to the client address finds it with that extractor.
        let lists = ready(
            Exemptions::new().deny_networks(["203.0.113.0/24"]),
            &HeaderKey::new("x-api-key").or(ClientIp::peer()),
        );
        assert_eq!(
            lists.listed(&key, &from("203.0.113.9:1", &[])),
            Listed::Denied
        );
    }

    #[test]
    fn networks_on_a_key_that_is_no_client_address_need_a_way_to_find_one() {
        let mut lists = Exemptions::new().allow_networks(["10.0.0.0/8"]);
        assert_eq!(
            lists.find_clients_with(&HeaderKey::new("x-api-key")),
            Err(KeyConfigError::NetworksWithoutClientIp.into())
        );
        // Keys alone need none.
        let mut keys = Exemptions::new().allow_key("internal");
        keys.find_clients_with(&HeaderKey::new("x-api-key"))
            .unwrap();
    }

    #[test]
    fn a_bad_network_is_a_configuration_error_of_the_layers_build() {
        let lists = Exemptions::new()
            .allow_key("batch")
            .deny_networks(["10.0.0.0/33", "nonsense"])
            .allow_key("other");
        let error = lists.validate().unwrap_err();
        assert!(error.to_string().contains("10.0.0.0/33"), "{error}");
        let error = crate::RateLimitLayer::builder()
            .rule(crate::Rule::gcra("api", crate::Quota::per_second(1)))
            .key(crate::key::GlobalKey::new("g"))
            .exemptions(lists)
            .build()
            .unwrap_err();
        assert!(error.to_string().contains("10.0.0.0/33"), "{error}");
    }
}
