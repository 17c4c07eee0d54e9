//! Soak: hundreds of requests through `ConcurrencyLimitLayer`, each at random completed, cut off
//! mid-body, cancelled (while acquiring or while running), panicking or failing, over a few keys.
//! Throughout, no key ever has more handlers running than its limit; at the end every slot has
//! been given back: nothing held in the store (memory count, Redis ZCARD), nothing left for the
//! heartbeat to renew.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{RedisServer, eventually};
use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use tower::{BoxError, ServiceExt, service_fn};
use tower_layer::Layer;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::store::permits::PermitStore;
use tower_redis_ratelimit::store::permits::Slot;
use tower_redis_ratelimit::{ConcurrencyLimitLayer, MemoryStore, RedisStore};

const LIMIT: u32 = 3;
const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const REQUESTS: u64 = 400;

/// xorshift64*: a reproducible sequence of choices (the interleaving still varies run to run).
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Handlers running per key, and the most ever seen at once.
#[derive(Default)]
struct Running {
    now: HashMap<String, u32>,
    most: u32,
}

struct Guard(Arc<Mutex<Running>>, String);

impl Drop for Guard {
    fn drop(&mut self) {
        *self.0.lock().unwrap().now.get_mut(&self.1).unwrap() -= 1;
    }
}

fn enter(running: &Arc<Mutex<Running>>, key: &str) -> Guard {
    let mut state = running.lock().unwrap();
    let now = state.now.entry(key.to_owned()).or_default();
    *now += 1;
    let now = *now;
    state.most = state.most.max(now);
    Guard(running.clone(), key.to_owned())
}

/// The soak's panics are expected: keep them out of the test output, and every other one in.
fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"soak panic") {
                default(info);
            }
        }));
    });
}

async fn soak(
    store: impl PermitStore + Clone,
    held: impl Fn(&str) -> u64,
    renewing: impl Fn() -> usize,
) {
    quiet_expected_panics();
    let refused = Arc::new(AtomicU32::new(0));
    let running = Arc::new(Mutex::new(Running::default()));
    let counting = running.clone();
    let layer = ConcurrencyLimitLayer::builder()
        .name("soak")
        .max_in_flight(LIMIT)
        .key(HeaderKey::new("x-key"))
        .store(store)
        // Failing open would admit over the limit; this soak checks the limit too.
        .failure_mode(FailureMode::Closed)
        .deadline(Duration::from_secs(10))
        .build()
        .unwrap();
    let service = layer.layer(service_fn(move |request: Request<Body>| {
        let running = counting.clone();
        async move {
            let key = request.headers()["x-key"].to_str().unwrap().to_owned();
            let guard = enter(&running, &key);
            let pause = request.headers()["x-pause-ms"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            tokio::time::sleep(Duration::from_millis(pause)).await;
            match request.uri().path() {
                "/panic" => panic!("soak panic"),
                "/error" => Err::<Response<Body>, BoxError>("soak error".into()),
                "/stream" => {
                    // A body that never ends unless the client drops it.
                    let frames = futures_util::stream::unfold(guard, |guard| async move {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        Some((Ok::<_, Infallible>(Bytes::from_static(b".")), guard))
                    });
                    Ok(Response::new(Body::from_stream(frames)))
                }
                _ => {
                    drop(guard);
                    Ok(Response::new(Body::from("done")))
                }
            }
        }
    }));

    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let mut tasks = Vec::new();
    let mut outcomes = HashMap::<&str, u32>::new();
    for _ in 0..REQUESTS {
        let key = KEYS[random.below(KEYS.len() as u64) as usize];
        let (path, mode) = match random.below(6) {
            0 => ("/", "complete"),
            1 => ("/stream", "body dropped"),
            2 => ("/", "cancelled"),
            3 => ("/panic", "panicked"),
            4 => ("/error", "failed"),
            _ => ("/stream", "body read then dropped"),
        };
        let pause = random.below(4);
        let cancel_after = Duration::from_millis(random.below(5));
        let request = Request::get(path)
            .header("x-key", key)
            .header("x-pause-ms", pause.to_string())
            .body(Body::empty())
            .unwrap();
        let refused = refused.clone();
        let service = service.clone().map_response(move |response| {
            if response.status() == http::StatusCode::TOO_MANY_REQUESTS {
                refused.fetch_add(1, Ordering::Relaxed);
            }
            response
        });
        tasks.push(tokio::spawn(async move {
            match mode {
                "cancelled" => {
                    let _ = tokio::time::timeout(cancel_after, service.oneshot(request)).await;
                }
                "body dropped" | "body read then dropped" => {
                    if let Ok(response) = service.oneshot(request).await {
                        let mut body = response.into_body();
                        if mode == "body read then dropped" {
                            let _ = body.frame().await;
                        }
                        tokio::time::sleep(cancel_after).await;
                    }
                }
                _ => {
                    if let Ok(response) = service.oneshot(request).await {
                        let _ = response.into_body().collect().await;
                    }
                }
            }
        }));
        *outcomes.entry(mode).or_default() += 1;
        if tasks.len() % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let mut panics = 0;
    for task in tasks {
        if let Err(err) = task.await {
            assert!(err.is_panic());
            panics += 1;
        }
    }
    assert!(
        panics > 0 && outcomes.len() == 6,
        "every ending was exercised: {outcomes:?}"
    );
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "the limit was reached (some requests were refused)"
    );
    for key in KEYS {
        eventually(Duration::from_secs(20), "every slot given back", || async {
            held(key) == 0
        })
        .await;
    }
    assert_eq!(renewing(), 0, "nothing left for the heartbeat");
    let running = running.lock().unwrap();
    assert!(running.now.values().all(|&n| n == 0));
    assert!(
        (1..=LIMIT).contains(&running.most),
        "at most {LIMIT} handlers per key ran at once, saw {}",
        running.most
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_soak_leaves_no_slot_held() {
    let store = MemoryStore::new();
    let (probe, renewing) = (store.clone(), store.clone());
    soak(
        store,
        move |key| probe.in_flight(&Slot::new("soak", key).unwrap()),
        move || renewing.renewing(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_soak_leaves_no_slot_held() {
    let redis = RedisServer::start();
    let store = RedisStore::open(&redis.url()).unwrap();
    let renewing = store.clone();
    soak(
        store,
        |key| redis.zcard(&format!("ratelimit:soak:cc:{{{key}}}")),
        move || renewing.renewing(),
    )
    .await;
    assert_eq!(redis.keys(), Vec::<String>::new(), "no key left behind");
}
