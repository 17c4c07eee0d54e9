//! A client speaking cleartext HTTP/2 (prior knowledge, as `curl --http2-prior-knowledge`) is
//! served: its requests go to the HTTP/1 upstream as HTTP/1.1.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::support::{Proxy, config_text, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleartext_http2_clients_are_forwarded_as_http1() {
    let upstream = upstream().await;
    let proxy = Proxy::start(&config_text(upstream, 2));
    let stream = tokio::net::TcpStream::connect(&proxy.addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let request = http::Request::get(format!("http://{}/api/echo", proxy.addr))
            .header("x-api-key", "h2")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        statuses.push(response.status().as_u16());
        if response.status() == 200 {
            let body = response.into_body().collect().await.unwrap().to_bytes();
            // The host it named (the :authority) reached the upstream.
            let body = String::from_utf8(body.to_vec()).unwrap();
            assert!(body.contains(&format!("|http|{}|", proxy.addr)), "{body}");
        }
    }
    assert_eq!(statuses, [200, 200, 429]);
}
