//! `ConcurrencyLimitLayer` over both stores: at most N requests in flight per key, a 429 with its
//! headers beyond, and the slot given back on every way a request can end: its body finished or
//! dropped, the client gone (future dropped), the handler panicking or failing, a permit moved out
//! of the request and dropped later. The failure modes against a dead or frozen Redis are in
//! `redis_outage`.

mod redis_outage;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{RedisServer, eventually, header};
use axum::body::Body;
use bytes::Bytes;
use futures_util::stream;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tower::{BoxError, Service, ServiceExt, service_fn};
use tower_layer::Layer;
use tower_redis_ratelimit::admission::MissingKey;
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::store::permits::Slot;
use tower_redis_ratelimit::{ConcurrencyLimitLayer, MemoryStore, RedisStore};

/// Far above what a correct release needs; only a leak waits this long.
const RELEASED_WITHIN: Duration = Duration::from_secs(10);

/// Where the slots live, and how many are held for `user`.
enum Backend {
    Memory(MemoryStore),
    Redis(RedisServer, RedisStore),
}

impl Backend {
    fn memory() -> Self {
        Backend::Memory(MemoryStore::new())
    }

    fn redis() -> Self {
        let server = RedisServer::start();
        let store = RedisStore::open(&server.url()).unwrap();
        Backend::Redis(server, store)
    }

    fn held(&self, user: &str) -> u64 {
        match self {
            Backend::Memory(store) => store.in_flight(&Slot::new("ws", user).unwrap()),
            Backend::Redis(server, _) => server.zcard(&format!("ratelimit:ws:cc:{{{user}}}")),
        }
    }

    fn layer(&self, max: u32) -> ConcurrencyLimitLayer {
        let builder = ConcurrencyLimitLayer::builder()
            .name("ws")
            .max_in_flight(max)
            .key(HeaderKey::new("x-user"))
            .deadline(Duration::from_secs(2));
        match self {
            Backend::Memory(store) => builder.store(store.clone()),
            Backend::Redis(_, store) => builder.store(store.clone()),
        }
        .build()
        .unwrap()
    }

    async fn released(&self, user: &str, expected: u64) {
        eventually(RELEASED_WITHIN, "slots given back", || async {
            self.held(user) == expected
        })
        .await;
    }
}

fn request(user: &str, path: &str) -> Request<Body> {
    Request::get(path)
        .header("x-user", user)
        .body(Body::empty())
        .unwrap()
}

/// A handler whose behaviour the path picks; `/wait` waits for the gate, `/stream` streams what
/// the test sends, `/hold` moves its permit into a task that keeps it until told.
#[derive(Clone)]
struct Handler {
    gate: Arc<Semaphore>,
    stream: Arc<Mutex<Option<mpsc::Receiver<Bytes>>>>,
    hold: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
}

impl Handler {
    fn new() -> Self {
        Self {
            gate: Arc::new(Semaphore::new(0)),
            stream: Arc::default(),
            hold: Arc::default(),
        }
    }

    async fn handle(self, request: Request<Body>) -> Result<Response<Body>, BoxError> {
        match request.uri().path() {
            "/wait" => {
                self.gate.acquire().await?.forget();
                Ok(Response::new(Body::from("done")))
            }
            "/stream" => {
                let receiver = self.stream.lock().unwrap().take().expect("one stream");
                let frames = stream::unfold(receiver, |mut receiver| async move {
                    let bytes = receiver.recv().await?;
                    Some((Ok::<_, Infallible>(bytes), receiver))
                });
                Ok(Response::new(Body::from_stream(frames)))
            }
            "/hold" => {
                let permit = request
                    .extensions()
                    .get::<ConcurrencyPermit>()
                    .expect("an admitted request carries its permit")
                    .clone();
                let until = self.hold.lock().unwrap().take().expect("one hold");
                tokio::spawn(async move {
                    let _permit = permit;
                    let _ = until.await;
                });
                Ok(Response::new(Body::empty()))
            }
            "/panic" => panic!("the handler panicked"),
            "/error" => Err("the handler failed".into()),
            _ => Ok(Response::new(Body::from("ok"))),
        }
    }
}

fn service(
    backend: &Backend,
    max: u32,
    handler: &Handler,
) -> impl Service<
    Request<Body>,
    Response = Response<tower_redis_ratelimit::concurrency::ConcurrencyBody<Body>>,
    Error = BoxError,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let handler = handler.clone();
    backend
        .layer(max)
        .layer(service_fn(move |request| handler.clone().handle(request)))
}

async fn n_in_flight_then_429(backend: Backend) {
    let handler = Handler::new();
    let svc = service(&backend, 2, &handler);
    let waiting: Vec<_> = (0..2)
        .map(|_| tokio::spawn(svc.clone().oneshot(request("u1", "/wait"))))
        .collect();
    eventually(RELEASED_WITHIN, "two requests in flight", || async {
        backend.held("u1") == 2
    })
    .await;

    let refused = svc.clone().oneshot(request("u1", "/wait")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "retry-after"), "1");
    assert_eq!(
        header(&refused, "ratelimit-policy"),
        r#""ws";q=2;qu="concurrent-requests""#
    );
    assert_eq!(header(&refused, "ratelimit"), r#""ws";r=0"#);
    assert_eq!(header(&refused, "rate-limiting-state"), "Deny");
    assert_eq!(header(&refused, "rate-limiting-total-requests"), "2");
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["policy"], "ws");

    // Another key has its own slots.
    let other = svc.clone().oneshot(request("u2", "/")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(header(&other, "ratelimit"), r#""ws";r=1"#);
    drop(other);

    handler.gate.add_permits(2);
    let mut free = Vec::new();
    for task in waiting {
        let response = task.await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, "rate-limiting-state"), "Allow");
        free.push(header(&response, "ratelimit"));
        assert_eq!(
            response.into_body().collect().await.unwrap().to_bytes(),
            "done"
        );
    }
    free.sort();
    assert_eq!(free, [r#""ws";r=0"#, r#""ws";r=1"#]);
    backend.released("u1", 0).await;
    backend.released("u2", 0).await;
    let again = svc.oneshot(request("u1", "/")).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
}

#[tokio::test]
async fn memory_admits_n_in_flight_and_refuses_the_next() {
    n_in_flight_then_429(Backend::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_admits_n_in_flight_and_refuses_the_next() {
    n_in_flight_then_429(Backend::redis()).await;
}

/// Every way a request can end gives its slot back, and nothing else does.
async fn every_ending_releases(backend: Backend) {
    let handler = Handler::new();
    let svc = service(&backend, 1, &handler);

    // A streamed body holds the slot while it streams, and gives it back once finished even if
    // the body itself is kept.
    let (sender, receiver) = mpsc::channel(4);
    *handler.stream.lock().unwrap() = Some(receiver);
    let response = svc.clone().oneshot(request("u", "/stream")).await.unwrap();
    let mut body = response.into_body();
    sender.send(Bytes::from("a")).await.unwrap();
    assert_eq!(
        body.frame().await.unwrap().unwrap().into_data().unwrap(),
        "a"
    );
    assert_eq!(backend.held("u"), 1, "streaming");
    drop(sender);
    assert!(body.frame().await.is_none());
    backend.released("u", 0).await;
    drop(body);

    // A body dropped mid-stream.
    let (sender, receiver) = mpsc::channel(4);
    *handler.stream.lock().unwrap() = Some(receiver);
    let response = svc.clone().oneshot(request("u", "/stream")).await.unwrap();
    assert_eq!(backend.held("u"), 1);
    drop(response);
    backend.released("u", 0).await;
    drop(sender);

    // The client goes away while the handler runs: the response future is dropped.
    let cancelled = tokio::spawn(svc.clone().oneshot(request("u", "/wait")));
    eventually(RELEASED_WITHIN, "the request in flight", || async {
        backend.held("u") == 1
    })
    .await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    backend.released("u", 0).await;

    // The handler panics: the slot is given back while the panic unwinds.
    let panicked = tokio::spawn(svc.clone().oneshot(request("u", "/panic")));
    assert!(panicked.await.unwrap_err().is_panic());
    backend.released("u", 0).await;

    // The handler fails.
    let failed = svc.clone().oneshot(request("u", "/error")).await;
    assert_eq!(failed.unwrap_err().to_string(), "the handler failed");
    backend.released("u", 0).await;

    // A permit moved out of the request keeps the slot after the response is done.
    let (stop, until) = oneshot::channel();
    *handler.hold.lock().unwrap() = Some(until);
    let response = svc.clone().oneshot(request("u", "/hold")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    let refused = svc.clone().oneshot(request("u", "/")).await.unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "still held"
    );
    assert_eq!(backend.held("u"), 1);
    stop.send(()).unwrap();
    backend.released("u", 0).await;

    // And after all that, the one slot is free.
    let last = svc.oneshot(request("u", "/")).await.unwrap();
    assert_eq!(last.status(), StatusCode::OK);
}

#[tokio::test]
async fn memory_every_ending_releases_the_slot() {
    every_ending_releases(Backend::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_every_ending_releases_the_slot() {
    every_ending_releases(Backend::redis()).await;
}

/// `RateLimit-Policy` of the `ws` limit of one request in flight.
const WS_POLICY: &str = r#""ws";q=1;qu="concurrent-requests""#;

/// A request without the key header is refused with 400, or passes unlimited when asked to.
#[tokio::test]
async fn a_missing_key_is_a_400_or_skipped() {
    let ok =
        service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let layer = |missing| {
        ConcurrencyLimitLayer::builder()
            .name("ws")
            .max_in_flight(1)
            .key(HeaderKey::new("x-user"))
            .on_missing_key(missing)
            .build()
            .unwrap()
    };
    let anonymous = || Request::get("/").body(Body::empty()).unwrap();
    let rejected = layer(MissingKey::Reject)
        .layer(ok)
        .oneshot(anonymous())
        .await
        .unwrap();
    assert_eq!(rejected.status(), StatusCode::BAD_REQUEST);
    // No decision, but the limit is static: the 400 names it.
    assert_eq!(header(&rejected, "ratelimit-policy"), WS_POLICY);
    assert_eq!(header(&rejected, "ratelimit"), "");
    let skipped = layer(MissingKey::Skip)
        .layer(ok)
        .oneshot(anonymous())
        .await
        .unwrap();
    assert_eq!(skipped.status(), StatusCode::OK);
    assert_eq!(header(&skipped, "ratelimit"), "");
}

/// Layers are Clone and every clone shares the slots (they live in the store), also through
/// axum's router, which clones the service per request.
#[tokio::test]
async fn clones_and_routers_share_one_limit() {
    let store = MemoryStore::new();
    let layer = ConcurrencyLimitLayer::builder()
        .name("ws")
        .max_in_flight(1)
        .key(HeaderKey::new("x-user"))
        .store(store.clone())
        .build()
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let wait = gate.clone();
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(move || async move {
                wait.acquire().await.unwrap().forget();
                "done"
            }),
        )
        .layer(layer);
    let first = tokio::spawn(app.clone().oneshot(request("u", "/")));
    eventually(RELEASED_WITHIN, "one in flight", || async {
        store.in_flight(&Slot::new("ws", "u").unwrap()) == 1
    })
    .await;
    let second = app.clone().oneshot(request("u", "/")).await.unwrap();
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    gate.add_permits(1);
    let first = first.await.unwrap().unwrap();
    assert_eq!(text(first).await, "done");
    assert_eq!(store.in_flight(&Slot::new("ws", "u").unwrap()), 0);
    assert_eq!(store.renewing(), 0);
}

async fn text(response: Response<Body>) -> String {
    crate::support::text(response).await
}

/// A custom rejection replaces the body; the layer still adds `Retry-After` and its headers.
#[tokio::test]
async fn custom_rejections_keep_the_headers() {
    let store = MemoryStore::new();
    let layer = ConcurrencyLimitLayer::builder()
        .name("ws")
        .max_in_flight(1)
        .key(HeaderKey::new("x-user"))
        .store(store.clone())
        .retry_after(Duration::from_secs(5))
        .on_rejection(
            |rejection: &tower_redis_ratelimit::concurrency::ConcurrencyLimitRejection| {
                Response::builder()
                    .status(rejection.status())
                    .body("busy, come back later")
                    .unwrap()
            },
        )
        .build()
        .unwrap();
    let handler = Handler::new();
    let inner = handler.clone();
    let svc = layer.layer(service_fn(move |request| inner.clone().handle(request)));
    let held = tokio::spawn(svc.clone().oneshot(request("u", "/wait")));
    eventually(RELEASED_WITHIN, "one in flight", || async {
        store.in_flight(&Slot::new("ws", "u").unwrap()) == 1
    })
    .await;
    let refused = svc.oneshot(request("u", "/")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "retry-after"), "5");
    assert_eq!(header(&refused, "ratelimit"), r#""ws";r=0"#);
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "busy, come back later");
    handler.gate.add_permits(1);
    drop(held.await.unwrap().unwrap());
    assert_eq!(store.in_flight(&Slot::new("ws", "u").unwrap()), 0);
}
