//! TLS: on the listener, and to an `https://` upstream whose certificate chains to the file's
//! CA. Two proxies show both: a client speaks plain HTTP to the first, which forwards over TLS
//! to the second, which listens with TLS and forwards to the upstream. A certificate is rotated
//! by replacing its files and sending SIGHUP.

use testkit::TempDir;

use crate::certificates::{certificate_in, served};
use crate::support::{Proxy, TempFile, config_text, get_with, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_listener_and_an_https_upstream() {
    let upstream = upstream().await;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let certificate = TempFile::new("pem", &certified.cert.pem());
    let key = TempFile::new("pem", &certified.signing_key.serialize_pem());
    let inner = Proxy::start(&config_text(upstream, 100).replace(
        "access_log = \"off\"",
        &format!(
            "access_log = \"off\"\ntls = {{ certificate = {:?}, private_key = {:?} }}",
            certificate.0, key.0
        ),
    ));
    let port = inner.addr.rsplit(':').next().unwrap();
    let outer_config = format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\nupstream = \"https://localhost:{port}\"\n\
         upstream_ca = {:?}\naccess_log = \"off\"\n",
        certificate.0
    );
    let outer = Proxy::start(&outer_config);
    let response = get_with(&outer.url("/api/echo"), &[("x-api-key", "tls")]).await;
    assert_eq!(response.status(), 200);
    // The inner proxy was reached over TLS: it says so to the upstream.
    let body = response.text().await.unwrap();
    assert!(body.contains(";proto=https|https|"), "{body}");

    // Without the CA, the certificate is not trusted: 502.
    let untrusting = Proxy::start(&outer_config.replace("upstream_ca", "# upstream_ca"));
    assert_eq!(
        get_with(&untrusting.url("/api/echo"), &[]).await.status(),
        502
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rotates_the_certificate_and_keeps_it_when_the_new_files_are_broken() {
    let upstream = upstream().await;
    let dir = TempDir::new("tls-rotation").unwrap();
    let first = certificate_in(dir.path());
    // Relative paths: from the file's directory, wherever the process was started.
    let config = config_text(upstream, 100).replace(
        "access_log = \"off\"",
        "access_log = \"off\"\ntls = { certificate = \"cert.pem\", private_key = \"key.pem\" }",
    );
    let (proxy, _) = Proxy::start_in(dir.path(), &config);
    assert_eq!(served(&proxy.addr, &[&first]).await, first);

    let second = certificate_in(dir.path());
    proxy.signal("-HUP");
    proxy.message_containing("configuration reloaded");
    assert_eq!(served(&proxy.addr, &[&first, &second]).await, second);

    std::fs::write(dir.path().join("cert.pem"), "not a certificate").unwrap();
    proxy.signal("-HUP");
    let refused = proxy.message_containing("configuration not reloaded");
    assert!(refused.contains("proxy.tls"), "{refused}");
    assert!(refused.contains("cert.pem"), "{refused}");
    assert_eq!(served(&proxy.addr, &[&first, &second]).await, second);
}
