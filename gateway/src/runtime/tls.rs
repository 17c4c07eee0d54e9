//! TLS on a listener: a certificate chain and its private key from PEM files (rustls), HTTP/2
//! and HTTP/1.1 offered by ALPN. The listener asks for the certificate in force at each
//! handshake, so that a reload that reads new files (a certificate rotated) is served to the
//! next connection without a restart, and one that cannot read them changes nothing.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// A certificate chain and its key, read and checked to match.
pub type Certified = Arc<CertifiedKey>;

/// Reads the certificate chain in `certificate` and the key in `private_key`; says which file
/// is wrong and why.
pub fn certified(certificate: &Path, private_key: &Path) -> Result<Certified, String> {
    let chain = CertificateDer::pem_file_iter(certificate)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("{}: {err}", certificate.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate in it", certificate.display()));
    }
    let key = PrivateKeyDer::from_pem_file(private_key)
        .map_err(|err| format!("{}: {err}", private_key.display()))?;
    CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
        .map(Arc::new)
        .map_err(|err| {
            format!(
                "{} with {}: {err}",
                certificate.display(),
                private_key.display()
            )
        })
}

/// An acceptor serving, at each handshake, the certificate `in_force` gives.
pub fn acceptor(
    in_force: impl Fn() -> Option<Certified> + Send + Sync + 'static,
) -> Result<TlsAcceptor, String> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|err| format!("TLS: {err}"))?
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(InForce(Box::new(in_force))));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The certificate of the configuration in force.
struct InForce(Box<dyn Fn() -> Option<Certified> + Send + Sync>);

impl std::fmt::Debug for InForce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InForce")
    }
}

impl ResolvesServerCert for InForce {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Certified> {
        (self.0)()
    }
}
