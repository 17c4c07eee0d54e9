//! [`RedisTls`]: the certificates of a store that reaches Redis over TLS (`rediss://`), and how
//! they go onto each connection's settings. The server's certificate is always verified: against
//! Mozilla's roots (webpki-roots), or against the store's own CA when it has one. There is no
//! way to turn verification off; a `rediss://…#insecure` URL is refused.

use std::fmt;

use crate::error::{ConfigError, StoreConfigError};

/// The certificates of a store on `rediss://` URLs: a CA to verify the servers with (else
/// Mozilla's roots), and a client certificate with its private key for a server that asks for
/// one (`tls-auth-clients`). Everything in PEM. Its `Debug` shows which parts are set, never
/// their contents.
///
/// ```
/// use tower_redis_ratelimit::store::RedisTls;
///
/// # let (ca, certificate, private_key) = (Vec::<u8>::new(), Vec::<u8>::new(), Vec::<u8>::new());
/// let tls = RedisTls::new().ca(ca).client_certificate(certificate, private_key);
/// assert_eq!(format!("{tls:?}"), "RedisTls { ca: true, client_certificate: true }");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedisTls {
    ca: Option<Vec<u8>>,
    client: Option<(Vec<u8>, Vec<u8>)>,
}

impl RedisTls {
    /// Servers verified against Mozilla's roots, no client certificate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Verifies servers against the certificates of `pem` (one or more) instead of Mozilla's
    /// roots: a private CA, or a managed Redis's own.
    pub fn ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca = Some(pem.into());
        self
    }

    /// Presents `certificate` (PEM, the chain to the server's trusted CA) with its
    /// `private_key` (PEM: PKCS#8, PKCS#1 or SEC1) to servers that ask for a client
    /// certificate.
    pub fn client_certificate(
        mut self,
        certificate: impl Into<Vec<u8>>,
        private_key: impl Into<Vec<u8>>,
    ) -> Self {
        self.client = Some((certificate.into(), private_key.into()));
        self
    }

    /// The certificates as redis-rs takes them, each part checked first so that a mistake is
    /// told at `build` and names its part.
    pub(in crate::store::redis) fn certificates(
        &self,
    ) -> Result<redis::TlsCertificates, ConfigError> {
        let checked = |part: &'static str, pem: &[u8]| {
            check(part, pem).map_err(|reason| StoreConfigError::InvalidTls { part, reason })
        };
        if let Some(ca) = &self.ca {
            checked("ca", ca)?;
        }
        if let Some((certificate, key)) = &self.client {
            checked("certificate", certificate)?;
            checked("private_key", key)?;
        }
        Ok(redis::TlsCertificates {
            client_tls: self.client.clone().map(|(client_cert, client_key)| {
                redis::ClientTlsConfig {
                    client_cert,
                    client_key,
                }
            }),
            root_cert: self.ca.clone(),
        })
    }
}

impl fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca", &self.ca.is_some())
            .field("client_certificate", &self.client.is_some())
            .finish()
    }
}

/// Whether `pem` holds what `part` (`ca`, `certificate` or `private_key`, as the configuration
/// file names them) needs: certificates, or a private key; if not, why.
pub(crate) fn check(part: &'static str, pem: &[u8]) -> Result<(), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    if part == "private_key" {
        return PrivateKeyDer::from_pem_slice(pem)
            .map(drop)
            .map_err(|err| format!("no PEM private key in it: {err}"));
    }
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("not PEM certificates: {err}"))?;
    if certificates.is_empty() {
        return Err("no PEM certificate in it".to_owned());
    }
    if part == "ca" {
        let mut roots = rustls::RootCertStore::empty();
        let (_, refused) = roots.add_parsable_certificates(certificates);
        if refused > 0 {
            return Err(format!(
                "{refused} of its certificates cannot be a trust anchor"
            ));
        }
    }
    Ok(())
}

/// `info` with the store's certificates when it has some, which only a `rediss://` address
/// takes. A `rediss://…#insecure` address is refused: the server is always verified.
pub(in crate::store::redis) fn secure(
    info: redis::ConnectionInfo,
    tls: Option<&RedisTls>,
    shown: &str,
) -> Result<redis::ConnectionInfo, ConfigError> {
    match info.addr() {
        redis::ConnectionAddr::TcpTls { insecure: true, .. } => {
            return Err(StoreConfigError::InsecureTls {
                address: shown.to_owned(),
            }
            .into());
        }
        redis::ConnectionAddr::TcpTls { .. } => {}
        _ if tls.is_some() => {
            return Err(StoreConfigError::TlsWithoutRediss {
                address: shown.to_owned(),
            }
            .into());
        }
        _ => return Ok(info),
    }
    let Some(tls) = tls else {
        return Ok(info);
    };
    // redis-rs attaches certificates to an address only through a client it builds.
    redis::Client::build_with_tls(info, tls.certificates()?)
        .map(|client| client.get_connection_info().clone())
        .map_err(|err| {
            StoreConfigError::Client {
                what: "Redis TLS",
                reason: err.to_string(),
            }
            .into()
        })
}
