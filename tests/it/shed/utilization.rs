//! The worker-utilisation shedder in an axum router, on a paused tokio clock: handlers that block
//! until the test lets them go drive the instance to capacity; low-priority requests then start
//! getting 503 while critical ones pass; the in-flight count returns to zero after finished,
//! cancelled, panicking and streamed requests.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::support::{header, text};
use axum::Router;
use axum::body::Body;
use axum::extract::Extension;
use axum::routing::get;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio::time::advance;
use tower::ServiceExt;
use tower_redis_ratelimit::UtilizationShedLayer;
use tower_redis_ratelimit::shed::{ControlLaw, Priority, UtilizationShedRejection};

const CAPACITY: usize = 4;

/// The random draws the layer uses, set by the test (stored as `f64` bits).
#[derive(Clone)]
struct Draw(Arc<AtomicU64>);

impl Draw {
    fn new(value: f64) -> Self {
        Draw(Arc::new(AtomicU64::new(value.to_bits())))
    }

    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::SeqCst);
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::SeqCst))
    }
}

/// The test's classifier: the priority is the path's first segment (`/low/...`, `/critical/...`).
/// A real service derives it from what the client cannot choose: the route, the method, the
/// authenticated account.
fn by_path(parts: &Parts) -> Priority {
    let first = parts.uri.path().trim_start_matches('/').split('/').next();
    first
        .and_then(|name| name.parse().ok())
        .unwrap_or(Priority::Normal)
}

/// `/{priority}/work` waits for a permit the test hands out; `/{priority}/quick` answers at once
/// with the priority the shedder recorded; `/low/panic` panics; `/low/stream` streams a body the
/// test feeds.
struct App {
    router: Router,
    layer: UtilizationShedLayer,
    gate: Arc<Semaphore>,
    draw: Draw,
}

fn app(draw: f64, stream: Option<mpsc::Receiver<&'static str>>) -> App {
    let draw = Draw::new(draw);
    let random = draw.clone();
    let layer = UtilizationShedLayer::builder()
        .capacity(CAPACITY)
        .classify(by_path)
        .random_source(move || random.get())
        .build()
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let wait = gate.clone();
    let stream = Arc::new(std::sync::Mutex::new(stream));
    let router = Router::new()
        .route(
            "/{priority}/work",
            get(move || async move {
                wait.acquire().await.unwrap().forget();
                "worked"
            }),
        )
        .route(
            "/{priority}/quick",
            get(|Extension(priority): Extension<Priority>| async move { priority.to_string() }),
        )
        .route(
            "/low/panic",
            get(|| async {
                if true {
                    panic!("the handler failed");
                }
                "unreachable"
            }),
        )
        .route(
            "/low/stream",
            get(move || {
                let receiver = stream.lock().unwrap().take().expect("one stream per test");
                async move {
                    let chunks = futures_util::stream::unfold(receiver, |mut receiver| async {
                        let chunk = receiver.recv().await?;
                        Some((Ok::<_, Infallible>(chunk), receiver))
                    });
                    Body::from_stream(chunks)
                }
            }),
        )
        .layer(layer.clone());
    App {
        router,
        layer,
        gate,
        draw,
    }
}

async fn call(router: &Router, uri: &str) -> Response<Body> {
    let request = Request::get(uri).body(Body::empty()).unwrap();
    router.clone().oneshot(request).await.unwrap()
}

impl App {
    async fn get(&self, uri: &str) -> Response<Body> {
        call(&self.router, uri).await
    }

    async fn status(&self, uri: &str) -> StatusCode {
        // The response (and its body) is dropped here, so the request is no longer in flight.
        self.get(uri).await.status()
    }

    /// Sends a request in a task of its own, so the test can go on while it is in flight.
    fn spawn(&self, uri: &str) -> JoinHandle<Response<Body>> {
        let router = self.router.clone();
        let request = Request::get(uri).body(Body::empty()).unwrap();
        tokio::spawn(async move { router.oneshot(request).await.unwrap() })
    }

    /// Lets the other tasks run until the layer counts `expected` requests in flight.
    async fn settle(&self, expected: usize) {
        for _ in 0..1000 {
            if self.layer.in_flight() == expected {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!(
            "{} requests in flight, expected {expected}",
            self.layer.in_flight()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn at_capacity_low_priority_requests_are_shed_after_the_delay_and_critical_ones_pass() {
    // Every draw is 0.51: a request is shed once its priority's drop probability passes 51%.
    let app = app(0.51, None);
    let workers: Vec<_> = (0..CAPACITY).map(|_| app.spawn("/normal/work")).collect();
    app.settle(CAPACITY).await;

    // Utilisation 100%, measured at each request. Low is shed with probability 3 × (t − 28) / 120,
    // so from t = 49 s on; Normal (3 × (t − 28) / 120 − 1) not before t = 69 s.
    let mut first_shed = None;
    for second in 1..=60 {
        advance(Duration::from_secs(1)).await;
        let low = app.status("/low/quick").await;
        if low == StatusCode::SERVICE_UNAVAILABLE && first_shed.is_none() {
            first_shed = Some(second);
        }
        if second < 49 {
            assert_eq!(low, StatusCode::OK, "low at {second}s");
        } else {
            assert_eq!(low, StatusCode::SERVICE_UNAVAILABLE, "low at {second}s");
        }
        assert_eq!(app.status("/normal/quick").await, StatusCode::OK);
        assert_eq!(app.status("/critical/quick").await, StatusCode::OK);
    }
    assert_eq!(first_shed, Some(49));
    assert!((app.layer.drop_probability(Priority::Low) - 0.8).abs() < 1e-9);
    assert_eq!(app.layer.drop_probability(Priority::Normal), 0.0);

    // The refusal: 503, Retry-After, a problem+json body naming the priority.
    let response = app.get("/low/quick").await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(header(&response, "retry-after"), "5");
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
    assert_eq!(body["status"], 503);
    assert_eq!(body["priority"], "low");
    assert_eq!(body["retry_after"], 5);
    assert_eq!(
        body["detail"],
        "The service is overloaded and refuses 80% of low priority requests to recover. \
         Retry after 5 seconds."
    );
    // Only the admitted requests counted: the four workers.
    assert_eq!(app.layer.in_flight(), CAPACITY);

    // The overload ends; the shedding does not stop at once but recovers at 1/120 per second
    // (utilisation 0): Low's probability 3 × (32 − k) / 120 stays above 51% for 11 more seconds.
    app.gate.add_permits(CAPACITY);
    for worker in workers {
        let response = worker.await.unwrap();
        assert_eq!(text(response).await, "worked");
    }
    assert_eq!(app.layer.in_flight(), 0);
    for second in 1..=20 {
        advance(Duration::from_secs(1)).await;
        let expected = if second <= 11 {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        };
        assert_eq!(app.status("/low/quick").await, expected, "{second}s after");
    }
    assert_eq!(app.layer.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn when_everything_else_is_shed_critical_requests_still_pass() {
    // The highest possible draw: only a drop probability of 100% sheds.
    let app = app(0.999, None);
    let workers: Vec<_> = (0..2 * CAPACITY).map(|_| app.spawn("/high/work")).collect();
    app.settle(2 * CAPACITY).await;
    for _ in 0..148 {
        advance(Duration::from_secs(1)).await;
        assert_eq!(app.status("/critical/quick").await, StatusCode::OK);
    }
    for priority in ["low", "normal", "high"] {
        let uri = format!("/{priority}/quick");
        assert_eq!(
            app.status(&uri).await,
            StatusCode::SERVICE_UNAVAILABLE,
            "{uri}"
        );
    }
    // Even a draw of 0 (shed whatever the probability) never touches critical traffic.
    app.draw.set(0.0);
    let response = app.get("/critical/quick").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        text(response).await,
        "critical",
        "the handler sees the priority"
    );
    app.gate.add_permits(2 * CAPACITY);
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(app.layer.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn below_the_dead_zone_nothing_is_shed_however_long_it_lasts() {
    // Three of four workers busy: 75%, inside the dead zone. A draw of 0 sheds at any chance.
    let app = app(0.0, None);
    let workers: Vec<_> = (0..CAPACITY - 1).map(|_| app.spawn("/low/work")).collect();
    app.settle(CAPACITY - 1).await;
    for second in 1..=600 {
        advance(Duration::from_secs(1)).await;
        assert_eq!(app.status("/low/quick").await, StatusCode::OK, "{second}s");
    }
    assert_eq!(
        app.layer.shedding_amount(),
        ControlLaw::default().resting_amount()
    );
    app.gate.add_permits(CAPACITY);
    for worker in workers {
        worker.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn cancelled_and_panicking_requests_leave_the_count() {
    let app = app(0.5, None);
    // A client that goes away: the request's future is dropped mid-handler.
    let cancelled = app.spawn("/low/work");
    app.settle(1).await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert_eq!(app.layer.in_flight(), 0);

    // A handler that panics: unwinding drops the future.
    let panicked = app.spawn("/low/panic").await.unwrap_err();
    assert!(panicked.is_panic());
    assert_eq!(app.layer.in_flight(), 0);

    // Both kinds at once, mixed with requests that finish.
    let mut tasks = Vec::new();
    for i in 0..12 {
        tasks.push(app.spawn(if i % 3 == 0 {
            "/low/panic"
        } else {
            "/normal/work"
        }));
    }
    app.settle(8).await;
    for task in &tasks[..6] {
        task.abort();
    }
    app.gate.add_permits(12);
    for task in tasks {
        let _ = task.await;
    }
    assert_eq!(app.layer.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_response_counts_until_its_body_is_sent_or_dropped() {
    let (sender, receiver) = mpsc::channel(4);
    let app = app(0.5, Some(receiver));
    let response = app.get("/low/stream").await;
    assert_eq!(response.status(), StatusCode::OK);
    // The handler has returned, but the body is still being produced.
    assert_eq!(app.layer.in_flight(), 1);
    let mut body = response.into_body();
    sender.send("part one").await.unwrap();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "part one");
    assert_eq!(app.layer.in_flight(), 1);
    drop(sender);
    assert!(body.frame().await.is_none());
    assert_eq!(app.layer.in_flight(), 0, "released when the body ended");
    drop(body);
    assert_eq!(app.layer.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_utilisation_function_and_a_custom_rejection() {
    let load = Draw::new(0.5);
    let measured = load.clone();
    let layer = UtilizationShedLayer::builder()
        .utilization(move || measured.get())
        .control_law(ControlLaw::default().priorities([Priority::Normal]))
        .random_source(|| 0.0)
        .retry_after(Duration::from_millis(1_500))
        .on_rejection(|shedding: &UtilizationShedRejection| {
            Response::builder()
                .status(shedding.status())
                .body(format!("busy, {} traffic waits", shedding.priority()))
                .unwrap()
        })
        .build()
        .unwrap();
    let router = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer.clone());

    // Half loaded for ten minutes: nothing happens.
    for _ in 0..600 {
        advance(Duration::from_secs(1)).await;
        assert_eq!(call(&router, "/").await.status(), StatusCode::OK);
    }
    // Saturated: Normal is the only band, so it is shed from the 29th second.
    load.set(1.0);
    for second in 1..=29 {
        advance(Duration::from_secs(1)).await;
        let response = call(&router, "/").await;
        if second < 29 {
            assert_eq!(response.status(), StatusCode::OK, "{second}s");
        } else {
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(
                header(&response, "retry-after"),
                "2",
                "added to custom responses, in whole seconds rounded up"
            );
            assert_eq!(text(response).await, "busy, normal traffic waits");
        }
    }
    assert_eq!(layer.in_flight(), 0);
}
