//! TLS on a listener: a certificate chain and its private key from PEM files (rustls), HTTP/2
//! and HTTP/1.1 offered by ALPN.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// An acceptor serving the certificate chain in `certificate` with the key in `private_key`.
pub fn acceptor(certificate: &Path, private_key: &Path) -> Result<TlsAcceptor, String> {
    let chain = CertificateDer::pem_file_iter(certificate)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("{}: {err}", certificate.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate in it", certificate.display()));
    }
    let key = PrivateKeyDer::from_pem_file(private_key)
        .map_err(|err| format!("{}: {err}", private_key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|err| format!("TLS: {err}"))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|err| format!("{}: {err}", certificate.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
