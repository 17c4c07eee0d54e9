//! The upstream every mode forwards to: hyper's HTTP/1.1 server answering `GET /` with a short
//! body, on a runtime of its own (one thread) so that it costs every mode alike.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use testkit::BoxError;

/// The running upstream.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    /// Kept alive for as long as the upstream serves.
    _runtime: tokio::runtime::Runtime,
}

pub(crate) fn start() -> Result<Upstream, BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("upstream")
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_: Request<Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(Upstream {
        addr,
        _runtime: runtime,
    })
}
