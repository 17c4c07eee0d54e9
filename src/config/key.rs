//! Keys in a configuration file: who a route's limit is counted against.

use std::sync::Arc;

use serde::Deserialize;

use super::{error, invalid};
use crate::error::{ConfigError, KeyConfigError};
use crate::key::{
    ClientIp, ForwardedHeader, GlobalKey, HeaderKey, KeyExtractor, KeyExtractorExt, UserId,
};

/// Who a route's limit counts against. In TOML:
///
/// ```toml
/// key = { header = "x-api-key" }                      # one header (several: headers = [..])
/// key = { client_ip = {} }                            # the TCP peer
/// key = { client_ip = { trusted_proxies = ["10.0.0.0/8"], forwarded_header = "x-forwarded-for" } }
/// key = { user_id = true }                            # the UserId an auth layer inserted
/// key = { global = "search" }                         # one key for every request
/// key = { header = "x-api-key", or = { client_ip = {} } }  # the first that finds a key
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// One request header's value.
    #[serde(default)]
    pub header: Option<String>,
    /// Several headers' values, together.
    #[serde(default)]
    pub headers: Option<Vec<String>>,
    /// The client's address.
    #[serde(default)]
    pub client_ip: Option<ClientIpConfig>,
    /// The [`UserId`] in the request extensions (`true`).
    #[serde(default)]
    pub user_id: Option<bool>,
    /// One key, this name, for every request.
    #[serde(default)]
    pub global: Option<String>,
    /// The key to use when this one finds none.
    #[serde(default)]
    pub or: Option<Box<KeyConfig>>,
}

/// The client address as a key: the TCP peer, or behind trusted proxies the rightmost address
/// they did not add.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClientIpConfig {
    /// Networks (CIDRs or single addresses) of the proxies in front of the service. Empty: the
    /// TCP peer is the client.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// `x-forwarded-for` (default) or `forwarded` (RFC 7239).
    #[serde(default)]
    pub forwarded_header: Option<String>,
    /// IPv6 clients grouped by this prefix length (default 64).
    #[serde(default)]
    pub ipv6_prefix: Option<u8>,
    /// IPv4 clients grouped by this prefix length (default 32).
    #[serde(default)]
    pub ipv4_prefix: Option<u8>,
}

impl KeyConfig {
    /// The extractor this configuration describes (for keys outside `routes`, e.g. a proxy's
    /// WebSocket limit); its errors name the field as `key`.
    pub fn extractor(&self) -> Result<Arc<dyn KeyExtractor>, ConfigError> {
        self.build("key")
    }

    /// The extractor, its errors named from `field` (`routes.api.key`).
    pub(super) fn build(&self, field: &str) -> Result<Arc<dyn KeyExtractor>, ConfigError> {
        let named = [
            ("header", self.header.is_some()),
            ("headers", self.headers.is_some()),
            ("client_ip", self.client_ip.is_some()),
            ("user_id", self.user_id.is_some()),
            ("global", self.global.is_some()),
        ];
        let set: Vec<&str> = named
            .iter()
            .filter(|(_, set)| *set)
            .map(|(name, _)| *name)
            .collect();
        let one = match set.as_slice() {
            [one] => *one,
            [] => return Err(invalid(field.to_owned(), KeyConfigError::NoKey)),
            many => {
                return Err(invalid(
                    field.to_owned(),
                    KeyConfigError::SeveralKeys {
                        keys: many.to_vec(),
                    },
                ));
            }
        };
        let at = |name: &str| format!("{field}.{name}");
        let key: Arc<dyn KeyExtractor> = match one {
            "header" => Arc::new(header_key(
                &[self.header.clone().unwrap_or_default()],
                &at("header"),
                false,
            )?),
            "headers" => {
                let names = self.headers.clone().unwrap_or_default();
                if names.is_empty() {
                    return Err(invalid(at("headers"), KeyConfigError::Empty));
                }
                Arc::new(header_key(&names, &at("headers"), true)?)
            }
            "client_ip" => Arc::new(
                self.client_ip
                    .as_ref()
                    .expect("set")
                    .build(&at("client_ip"))?,
            ),
            "user_id" => {
                if self.user_id != Some(true) {
                    return Err(invalid(at("user_id"), KeyConfigError::UserIdFalse));
                }
                Arc::new(UserId::key())
            }
            _ => {
                let name = self.global.clone().unwrap_or_default();
                if name.is_empty() {
                    return Err(invalid(at("global"), KeyConfigError::Empty));
                }
                Arc::new(GlobalKey::new(name))
            }
        };
        match &self.or {
            Some(or) => Ok(Arc::new(key.or(or.build(&at("or"))?))),
            None => Ok(key),
        }
    }
}

impl ClientIpConfig {
    pub(super) fn build(&self, field: &str) -> Result<ClientIp, ConfigError> {
        let header = match self.forwarded_header.as_deref() {
            None | Some("x-forwarded-for") => ForwardedHeader::XForwardedFor,
            Some("forwarded") => ForwardedHeader::Forwarded,
            Some(other) => {
                return Err(invalid(
                    format!("{field}.forwarded_header"),
                    KeyConfigError::UnknownForwardedHeader {
                        header: other.to_owned(),
                    },
                ));
            }
        };
        let mut ip = if self.trusted_proxies.is_empty() {
            if self.forwarded_header.is_some() {
                return Err(invalid(
                    format!("{field}.forwarded_header"),
                    KeyConfigError::ForwardedWithoutProxies,
                ));
            }
            ClientIp::peer()
        } else {
            ClientIp::behind_proxies(header, self.trusted_proxies.iter().map(String::as_str))
                .map_err(|err| {
                    error::at_item(
                        &format!("{field}.trusted_proxies"),
                        &self.trusted_proxies,
                        err,
                    )
                })?
        };
        let prefix = |setting: &str, len: u8, max: u8| {
            if (1..=max).contains(&len) {
                Ok(len)
            } else {
                Err(invalid(
                    format!("{field}.{setting}"),
                    KeyConfigError::PrefixOutOfRange { len, max },
                ))
            }
        };
        if let Some(len) = self.ipv6_prefix {
            ip = ip.ipv6_prefix(prefix("ipv6_prefix", len, 128)?);
        }
        if let Some(len) = self.ipv4_prefix {
            ip = ip.ipv4_prefix(prefix("ipv4_prefix", len, 32)?);
        }
        Ok(ip)
    }
}

/// The key of the headers `names`, each error named from `field` (`…key.headers`, an item of
/// it: `…key.headers[1]`).
fn header_key(names: &[String], field: &str, list: bool) -> Result<HeaderKey, ConfigError> {
    let at = |index: usize| {
        if list {
            format!("{field}[{index}]")
        } else {
            field.to_owned()
        }
    };
    let mut key = HeaderKey::try_new(&names[0]).map_err(|err| err.at(at(0)))?;
    for (index, name) in names.iter().enumerate().skip(1) {
        HeaderKey::try_new(name).map_err(|err| err.at(at(index)))?;
        key = key.and(name);
    }
    Ok(key)
}
