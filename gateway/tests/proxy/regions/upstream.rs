//! The upstream behind every region's proxies: answers 200 and logs each request it is sent
//! (every one a proxy admitted), with its time, region, key and whether its route is the global
//! policy's. Admissions are counted from this log, not from what the clients were told.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, Uri};
use axum::routing::any;

use super::drive::{REGION_HEADER, SENT_HEADER, now_us};

/// The path prefix of the global policy's route; the others are a plain policy's.
pub(crate) const GLOBAL_PATH: &str = "/api/";
pub(crate) const PLAIN_PATH: &str = "/plain/";
/// The header holding the client's key, the routes' `key`.
pub(crate) const KEY_HEADER: &str = "x-api-key";

/// A request the upstream was sent.
#[derive(Clone, Debug)]
pub(crate) struct Arrival {
    /// µs since the Unix epoch, by the upstream's clock.
    pub(crate) at_us: u64,
    /// When its client sent it (µs since the epoch): the proxy decided in between.
    pub(crate) sent_us: u64,
    pub(crate) region: usize,
    pub(crate) key: String,
    pub(crate) global: bool,
}

/// The upstream's address and log; stopped when dropped.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    pub(crate) log: Arc<Mutex<Vec<Arrival>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Upstream {
    pub(crate) fn start() -> Self {
        let log = Arc::<Mutex<Vec<Arrival>>>::default();
        let logged = log.clone();
        let app = Router::new().fallback(any(move |uri: Uri, headers: HeaderMap| {
            let log = logged.clone();
            async move {
                let at_us = now_us();
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                let arrival = Arrival {
                    at_us,
                    sent_us: header(SENT_HEADER).parse().expect("the driver's time"),
                    region: header(REGION_HEADER).parse().expect("the driver's region"),
                    key: header(KEY_HEADER),
                    global: uri.path().starts_with(GLOBAL_PATH),
                };
                log.lock().unwrap().push(arrival);
                "admitted"
            }
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        // On a thread and runtime of its own: the drivers' tasks, busy in the test's runtime,
        // must not delay the time an arrival is logged with (a window's admission logged
        // late counts in the next).
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
            })
        });
        Self {
            addr,
            log,
            _stop: stop,
        }
    }
}
