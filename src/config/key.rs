//! Keys in a configuration file: who a route's limit is counted against.

use std::sync::Arc;

use serde::Deserialize;

use crate::error::ConfigError;
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
            [] => {
                return Err(invalid(
                    field,
                    "names no key: set one of header, headers, client_ip, user_id, global",
                ));
            }
            many => {
                return Err(invalid(
                    field,
                    &format!(
                        "names several keys ({}): set one, and `or` for a second",
                        many.join(", ")
                    ),
                ));
            }
        };
        let at = |name: &str| format!("{field}.{name}");
        let key: Arc<dyn KeyExtractor> = match one {
            "header" => Arc::new(header_key(
                &[self.header.clone().unwrap_or_default()],
                &at("header"),
            )?),
            "headers" => {
                let names = self.headers.clone().unwrap_or_default();
                if names.is_empty() {
                    return Err(invalid(&at("headers"), "is empty"));
                }
                Arc::new(header_key(&names, &at("headers"))?)
            }
            "client_ip" => Arc::new(
                self.client_ip
                    .as_ref()
                    .expect("set")
                    .build(&at("client_ip"))?,
            ),
            "user_id" => {
                if self.user_id != Some(true) {
                    return Err(invalid(&at("user_id"), "is false: leave it out instead"));
                }
                Arc::new(UserId::key())
            }
            _ => {
                let name = self.global.clone().unwrap_or_default();
                if name.is_empty() {
                    return Err(invalid(&at("global"), "is empty: name the global key"));
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
    fn build(&self, field: &str) -> Result<ClientIp, ConfigError> {
        let header = match self.forwarded_header.as_deref() {
            None | Some("x-forwarded-for") => ForwardedHeader::XForwardedFor,
            Some("forwarded") => ForwardedHeader::Forwarded,
            Some(other) => {
                return Err(invalid(
                    &format!("{field}.forwarded_header"),
                    &format!("is {other:?}: use \"x-forwarded-for\" or \"forwarded\""),
                ));
            }
        };
        let mut ip = if self.trusted_proxies.is_empty() {
            if self.forwarded_header.is_some() {
                return Err(invalid(
                    &format!("{field}.forwarded_header"),
                    "is set without trusted_proxies: a forwarded header is only read from proxies you trust",
                ));
            }
            ClientIp::peer()
        } else {
            ClientIp::behind_proxies(header, self.trusted_proxies.iter().map(String::as_str))
                .map_err(|err| err.at(format!("{field}.trusted_proxies")))?
        };
        if let Some(len) = self.ipv6_prefix {
            if !(1..=128).contains(&len) {
                return Err(invalid(&format!("{field}.ipv6_prefix"), "must be 1 to 128"));
            }
            ip = ip.ipv6_prefix(len);
        }
        if let Some(len) = self.ipv4_prefix {
            if !(1..=32).contains(&len) {
                return Err(invalid(&format!("{field}.ipv4_prefix"), "must be 1 to 32"));
            }
            ip = ip.ipv4_prefix(len);
        }
        Ok(ip)
    }
}

fn header_key(names: &[String], field: &str) -> Result<HeaderKey, ConfigError> {
    let mut key = HeaderKey::try_new(&names[0]).map_err(|err| err.at(field.to_owned()))?;
    for name in &names[1..] {
        HeaderKey::try_new(name).map_err(|err| err.at(field.to_owned()))?;
        key = key.and(name);
    }
    Ok(key)
}

fn invalid(field: &str, reason: &str) -> ConfigError {
    ConfigError::Field {
        field: field.to_owned(),
        reason: reason.to_owned(),
    }
}
