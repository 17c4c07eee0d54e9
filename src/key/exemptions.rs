//! [`Exemptions`]: keys and networks a keyed layer lets through unchecked, or refuses outright.

use std::collections::HashSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::Key;
use super::client_ip::parse_network;
use crate::error::ConfigError;

/// Allow and deny lists for a keyed layer
/// ([`RateLimitLayerBuilder::exemptions`](crate::rate::RateLimitLayerBuilder::exemptions)): a request whose
/// key is on the allow list passes unchecked (no store call, no rate-limit headers); one on the
/// deny list is refused with 403 Forbidden; the deny list wins when a key is on both.
///
/// Networks (CIDRs, or single addresses) match keys that are client addresses, as
/// [`ClientIp`](super::ClientIp) makes them: an address, or the network it is grouped into
/// (`2001:db8:1:2::/64`), which matches when the listed network contains it whole.
///
/// ```
/// use tower_redis_ratelimit::key::Exemptions;
///
/// let exemptions = Exemptions::new()
///     .allow_key("internal-batch-job")
///     .allow_networks(["10.0.0.0/8", "2001:db8::/32"])
///     .deny_networks(["203.0.113.0/24"]);
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

    /// What the lists say about `key`.
    pub(crate) fn listed(&self, key: &Key) -> Listed {
        let network = || address(key);
        let within = |networks: &[IpNet], key: Option<IpNet>| {
            key.is_some_and(|key| networks.iter().any(|network| network.contains(&key)))
        };
        if self.deny_keys.contains(key) || within(&self.deny_networks, network()) {
            Listed::Denied
        } else if self.allow_keys.contains(key) || within(&self.allow_networks, network()) {
            Listed::Allowed
        } else {
            Listed::Neither
        }
    }
}

/// A key that is a client address or network, as one network.
fn address(key: &Key) -> Option<IpNet> {
    let text = std::str::from_utf8(key.as_bytes()).ok()?;
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<IpAddr>().ok().map(IpNet::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_networks_are_allowed_or_denied_and_denial_wins() {
        let lists = Exemptions::new()
            .allow_key("batch")
            .deny_key("abuser")
            .allow_networks(["10.0.0.0/8", "2001:db8::/32"])
            .deny_networks(["10.6.6.0/24", "192.0.2.7"]);
        lists.validate().unwrap();
        let listed = |key: &str| lists.listed(&Key::from(key));
        assert_eq!(listed("batch"), Listed::Allowed);
        assert_eq!(listed("abuser"), Listed::Denied);
        assert_eq!(listed("10.1.2.3"), Listed::Allowed);
        assert_eq!(listed("10.6.6.9"), Listed::Denied);
        assert_eq!(listed("192.0.2.7"), Listed::Denied);
        assert_eq!(listed("192.0.2.8"), Listed::Neither);
        // An IPv6 client grouped by /64, inside an allowed /32.
        assert_eq!(listed("2001:db8:1:2::/64"), Listed::Allowed);
        // A /64 only partly inside a listed network does not match it.
        let narrow = Exemptions::new().allow_networks(["2001:db8:1:2::/96"]);
        assert_eq!(
            narrow.listed(&Key::from("2001:db8:1:2::/64")),
            Listed::Neither
        );
        assert_eq!(listed("not-an-address"), Listed::Neither);
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
