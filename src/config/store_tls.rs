//! A Redis store's `tls` table: the PEM files of `RedisStoreBuilder::tls`, read when the store
//! is built (so a reload reads them again), their paths relative to the file's directory.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::LimitsConfig;
#[cfg(feature = "tls")]
use super::{SettingError, invalid};
#[cfg(feature = "tls")]
use crate::error::ConfigError;

/// `tls = { ca = "ca.pem", certificate = "client.pem", private_key = "client.key" }` beside a
/// `rediss://` URL (or `rediss://` nodes or sentinels). Every field is optional: without `ca`
/// the servers are verified against Mozilla's roots; `certificate` and `private_key` go
/// together, for a server that asks for a client certificate.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoreTlsConfig {
    /// The CA that signed the servers' certificates (PEM).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// The client certificate (PEM), with `private_key`.
    #[serde(default)]
    pub certificate: Option<PathBuf>,
    /// The client certificate's private key (PEM), with `certificate`.
    #[serde(default)]
    pub private_key: Option<PathBuf>,
}

impl StoreTlsConfig {
    /// How `check` shows it: `ca ca.pem, client certificate client.pem`, or `Mozilla's roots`.
    pub fn describe(&self) -> String {
        let mut parts = vec![match &self.ca {
            Some(ca) => format!("ca {}", ca.display()),
            None => "Mozilla's roots".to_owned(),
        }];
        if let Some(certificate) = &self.certificate {
            parts.push(format!("client certificate {}", certificate.display()));
        }
        parts.join(", ")
    }

    /// The files read and checked, as the store takes them; errors name the field (under
    /// `field`, the store's `tls`) and the file.
    #[cfg(feature = "tls")]
    pub(super) fn read(&self, field: &str) -> Result<crate::store::RedisTls, ConfigError> {
        let file = |part: &'static str, path: &Path| -> Result<Vec<u8>, ConfigError> {
            let wrong = |reason: String| {
                invalid(
                    format!("{field}.{part}"),
                    SettingError::TlsFile {
                        path: path.display().to_string(),
                        reason,
                    },
                )
            };
            let pem = std::fs::read(path).map_err(|err| wrong(format!("cannot read it: {err}")))?;
            crate::store::check_tls(part, &pem).map_err(wrong)?;
            Ok(pem)
        };
        let mut tls = crate::store::RedisTls::new();
        if let Some(ca) = &self.ca {
            tls = tls.ca(file("ca", ca)?);
        }
        match (&self.certificate, &self.private_key) {
            (Some(certificate), Some(key)) => Ok(tls
                .client_certificate(file("certificate", certificate)?, file("private_key", key)?)),
            (None, None) => Ok(tls),
            (Some(_), None) => Err(alone(field, "private_key", "certificate")),
            (None, Some(_)) => Err(alone(field, "certificate", "private_key")),
        }
    }

    fn resolve_paths(&mut self, dir: &Path) {
        for path in [&mut self.ca, &mut self.certificate, &mut self.private_key]
            .into_iter()
            .flatten()
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }
}

#[cfg(feature = "tls")]
fn alone(field: &str, missing: &'static str, given: &'static str) -> ConfigError {
    invalid(
        format!("{field}.{missing}"),
        SettingError::TlsPair { missing, given },
    )
}

impl LimitsConfig {
    /// Every relative path of the limits (the `tls` files of the stores and of their regions'
    /// ledgers) made relative to `dir`, the file's directory: the one rule for every path a
    /// file names.
    pub(super) fn resolve_paths(&mut self, dir: &Path) {
        for store in self.stores.values_mut() {
            if let Some(tls) = &mut store.tls {
                tls.resolve_paths(dir);
            }
            #[cfg(feature = "regions")]
            if let Some(tls) = store
                .region
                .as_mut()
                .and_then(|region| region.ledger.tls.as_mut())
            {
                tls.resolve_paths(dir);
            }
        }
    }
}
