//! What gateways may speak: cleartext HTTP/2 (prior knowledge) beside HTTP/1.1 on the same
//! listener, and TLS on it.

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::process::GatewayProcess;
use crate::support::{Serve, get, header, limits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleartext_http2_questions_are_answered() {
    let serve = Serve::start(&format!(
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"off\"\n{}",
        limits(2)
    ));
    let addr = serve.addr.clone().unwrap();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut answers = Vec::new();
    for _ in 0..3 {
        let request = http::Request::get(format!("http://{addr}/forward_auth"))
            .header("x-forwarded-uri", "/api/x")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        answers.push((response.status().as_u16(), response.version()));
    }
    assert_eq!(
        answers,
        [
            (200, http::Version::HTTP_2),
            (200, http::Version::HTTP_2),
            (429, http::Version::HTTP_2)
        ]
    );
}

/// `serve` with TLS on its listener, asked through a `proxy` whose upstream it is (the test's
/// client speaks no TLS; the proxy does, trusting the test's certificate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_listener() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let files = testkit::TempDir::new("serve-tls").unwrap();
    let (certificate, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    std::fs::write(&certificate, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let serve = Serve::start(&format!(
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"off\"\n\
         tls = {{ certificate = {certificate:?}, private_key = {key:?} }}\n{}",
        limits(1)
    ));
    let port = serve.addr.as_deref().unwrap().rsplit(':').next().unwrap();
    let proxy_config = files.path().join("proxy.toml");
    std::fs::write(
        &proxy_config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\nupstream = \"https://localhost:{port}\"\n\
             upstream_ca = {certificate:?}\naccess_log = \"off\"\n"
        ),
    )
    .unwrap();
    let (_proxy, line, _) = GatewayProcess::start("proxy", &proxy_config, None);
    let proxy = line
        .strip_prefix("proxy: listening on http://")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("{line:?}"));
    let url = format!("http://{proxy}/forward_auth");
    let asked = [("x-forwarded-uri", "/api/x")];
    let admitted = get("127.0.0.1", &url, &asked).await;
    assert_eq!(admitted.status(), 200);
    assert_eq!(header(&admitted, "ratelimit"), "\"api\";r=0;t=60");
    assert_eq!(get("127.0.0.1", &url, &asked).await.status(), 429);
}
