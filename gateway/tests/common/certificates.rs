//! Certificates made by a test, and the one a TLS listener serves: shared by the `proxy` and
//! `serve` test binaries.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;

/// A self-signed certificate for `localhost` and its key, written as `cert.pem` and `key.pem`
/// in `dir`; its DER.
pub(crate) fn certificate_in(dir: &Path) -> CertificateDer<'static> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.join("cert.pem"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), certified.signing_key.serialize_pem()).unwrap();
    certified.cert.der().clone()
}

/// The certificate a new TLS connection to `addr` is served, the client trusting `trusted`.
pub(crate) async fn served(
    addr: &str,
    trusted: &[&CertificateDer<'static>],
) -> CertificateDer<'static> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in trusted {
        roots.add((*certificate).clone()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].clone()
}
