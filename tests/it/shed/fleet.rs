//! The fleet usage load shedder (seed 004) on both stores: one global slot for the whole fleet;
//! low-priority requests are shed (503) once half of the capacity is in use, normal ones at 80 %,
//! critical ones only when the fleet is full (the capacity is a hard bound). Servers sharing a
//! Redis form one fleet. The priority decided is recorded for inner layers and the handler.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{RedisServer, eventually, header};
use axum::body::Body;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use tower::{ServiceExt, service_fn};
use tower_layer::Layer;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::shed::{FleetShedLayer, Priority, UtilizationShedLayer};
use tower_redis_ratelimit::store::permits::{PermitStore, Slot};
use tower_redis_ratelimit::{MemoryStore, RedisStore};

fn priority(parts: &Parts) -> Priority {
    match parts.headers.get("x-priority").map(|v| v.as_bytes()) {
        Some(b"critical") => Priority::Critical,
        Some(b"low") => Priority::Low,
        _ => Priority::Normal,
    }
}

fn request(priority: &str) -> Request<Body> {
    Request::get("/")
        .header("x-priority", priority)
        .body(Body::empty())
        .unwrap()
}

/// Two "servers" (two layers, two store handles) sharing one fleet slot, capacity 10.
async fn sheds_by_priority(stores: [impl PermitStore + Clone; 2], held: impl Fn() -> u64) {
    let gate = Arc::new(Semaphore::new(0));
    let servers = stores.map(|store| {
        let wait = gate.clone();
        FleetShedLayer::builder()
            .capacity(10)
            .classify(priority)
            .store(store)
            .retry_after(Duration::from_secs(2))
            .deadline(Duration::from_secs(2))
            .build()
            .unwrap()
            .layer(service_fn(move |_: Request<Body>| {
                let wait = wait.clone();
                async move {
                    wait.acquire().await.unwrap().forget();
                    Ok::<_, Infallible>(Response::new(Body::from("served")))
                }
            }))
    });
    let mut in_flight = Vec::new();
    let mut admit = |priority: &'static str, count: u64| {
        for _ in 0..count {
            let server = servers[in_flight.len() % 2].clone();
            in_flight.push(tokio::spawn(server.oneshot(request(priority))));
        }
    };
    let shed = |priority: &'static str| {
        let server = servers[0].clone();
        async move {
            let response = server.oneshot(request(priority)).await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{priority}"
            );
            assert_eq!(header(&response, "retry-after"), "2");
            assert_eq!(
                header(&response, "ratelimit"),
                "",
                "no rate-limit headers by default"
            );
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(problem["status"], 503);
            assert!(
                problem["detail"].as_str().unwrap().contains(priority),
                "{problem}"
            );
        }
    };
    let filled = |count: u64| {
        let held = &held;
        async move {
            eventually(Duration::from_secs(10), "requests admitted", || async {
                held() == count
            })
            .await;
        }
    };

    admit("low", 5);
    filled(5).await;
    shed("low").await;

    admit("normal", 3);
    filled(8).await;
    shed("normal").await;
    shed("low").await;

    admit("critical", 2);
    filled(10).await;
    // The whole capacity is in use: a hard bound, critical requests included.
    shed("critical").await;
    shed("normal").await;

    gate.add_permits(10);
    for task in in_flight {
        let response = task.await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        drop(response);
    }
    filled(0).await;
    admit_one_of_each(&servers[1], &gate).await;
}

async fn admit_one_of_each<S>(server: &S, gate: &Semaphore)
where
    S: tower::Service<
            Request<Body>,
            Response = Response<tower_redis_ratelimit::concurrency::ConcurrencyBody<Body>>,
            Error = Infallible,
        > + Clone,
{
    gate.add_permits(3);
    for priority in ["low", "normal", "critical"] {
        let response = server.clone().oneshot(request(priority)).await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{priority} after the rush"
        );
    }
}

#[tokio::test]
async fn memory_sheds_lower_priorities_first() {
    let store = MemoryStore::new();
    let slot = Slot::new("fleet", "fleet").unwrap();
    let probe = store.clone();
    sheds_by_priority([store.clone(), store], move || probe.in_flight(&slot)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_servers_sharing_a_store_form_one_fleet() {
    let redis = RedisServer::start();
    let stores = [(); 2].map(|_| RedisStore::open(&redis.url()).unwrap());
    sheds_by_priority(stores, || redis.zcard("ratelimit:fleet:cc:{fleet}")).await;
}

/// On a Redis Cluster, the fleet's one slot key lives on one primary, which every server's store
/// finds.
#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_servers_form_one_fleet() {
    let cluster = crate::support::cluster::RedisCluster::start();
    let stores = [(); 2].map(|_| RedisStore::cluster(cluster.urls()).build().unwrap());
    let primary = cluster.node(cluster.primary_for("{fleet}"));
    sheds_by_priority(stores, || {
        primary
            .cli(&["ZCARD", "ratelimit:fleet:cc:{fleet}"])
            .parse()
            .unwrap_or(0)
    })
    .await;
}

/// The handler, and a utilisation shedder inside the fleet shedder (whose own classifier would say
/// `Low`), see the priority the fleet shedder decided; a priority an outer layer already recorded
/// is kept.
#[tokio::test]
async fn the_decided_priority_is_recorded_for_inner_layers() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let handler = service_fn(move |request: Request<Body>| {
        let priority = request.extensions().get::<Priority>().copied();
        record.lock().unwrap().push(priority);
        async { Ok::<_, Infallible>(Response::new(Body::empty())) }
    });
    let utilisation = UtilizationShedLayer::builder()
        .capacity(100)
        .classify(|_| Priority::Low)
        .build()
        .unwrap();
    let fleet = FleetShedLayer::builder()
        .capacity(10)
        .classify(priority)
        .build()
        .unwrap();
    let app = fleet.layer(utilisation.layer(handler));

    let response = app.clone().oneshot(request("critical")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut decided_outside = request("low");
    decided_outside.extensions_mut().insert(Priority::High);
    let response = app.oneshot(decided_outside).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        *seen.lock().unwrap(),
        [Some(Priority::Critical), Some(Priority::High)]
    );
}

/// The store failing: frozen, the wait is bounded by the deadline and the failure mode answers
/// (open by default: nothing shed; closed: 503 with `Retry-After: 1`), and the permits Redis
/// admits once it thaws are given back; down, the same answers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_failures_fail_open_or_closed_within_the_deadline() {
    let mut redis = RedisServer::start();
    let deadline = Duration::from_millis(200);
    let fleet = |failure: Option<FailureMode>| {
        let mut builder = FleetShedLayer::builder()
            .capacity(10)
            .classify(priority)
            .store(RedisStore::open(&redis.url()).unwrap())
            .deadline(deadline);
        if let Some(failure) = failure {
            builder = builder.failure_mode(failure);
        }
        builder
            .build()
            .unwrap()
            .layer(service_fn(|_: Request<Body>| async {
                Ok::<_, Infallible>(Response::new(Body::from("served")))
            }))
    };
    let (open, closed) = (fleet(None), fleet(Some(FailureMode::Closed)));
    let answer = |server: &tower_redis_ratelimit::shed::FleetShed<_>| {
        let server = server.clone();
        async move {
            let started = Instant::now();
            let response = server.oneshot(request("low")).await.unwrap();
            (response, started.elapsed())
        }
    };
    // Connected first, so that the acquisitions below are sent and then wait.
    for server in [&open, &closed] {
        assert_eq!(answer(server).await.0.status(), StatusCode::OK);
    }

    redis.freeze();
    let (passed, waited) = answer(&open).await;
    assert_eq!(passed.status(), StatusCode::OK, "fails open by default");
    assert!(
        waited >= deadline && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    let (refused, waited) = answer(&closed).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(header(&refused, "retry-after"), "1");
    assert!(
        waited >= deadline && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    redis.thaw();
    eventually(
        Duration::from_secs(10),
        "late permits given back",
        || async { redis.zcard("ratelimit:fleet:cc:{fleet}") == 0 },
    )
    .await;

    redis.kill();
    for _ in 0..3 {
        let (passed, waited) = answer(&open).await;
        assert_eq!(passed.status(), StatusCode::OK);
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        let (refused, waited) = answer(&closed).await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(header(&refused, "retry-after"), "1");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
    }
}
