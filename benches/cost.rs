//! Run with: cargo bench --bench cost --config "target.'cfg(unix)'.runner = 'valgrind --tool=callgrind'" -- <what> <n>
//!
//! A tight loop of `n` decisions, for counting instructions: callgrind counts the same number
//! whatever else the machine does, so two builds compare exactly where wall-clock benchmarks on a
//! shared machine differ by a fifth. Run each build at two `n` and divide the difference by the
//! difference of the `n`: start-up, and the one-time calibration of the clock (which varies from
//! run to run), drop out. `docs/performance.md` has the numbers.
//!
//! `<what>`:
//! - `layer`: a request through a `RateLimitLayer` on a `MemoryStore` (GCRA, one key, admitted);
//! - `layer-keys`: the same keyed by an `x-key` header cycling through 10,000 keys under
//!   1,000,000/s with a burst of 1,000,000, as `cargo bench --bench http`'s `allowed` scenario;
//! - `layer-keys-bare`: `layer-keys` writing no header (`HeaderFamilies::NONE`), as the HTTP
//!   bench's `memory-bare`;
//! - `layer-denied`: one key under 100/s with a burst of 100, so all but the first 100 requests
//!   are refused with a 429, as its `abusive` scenario;
//! - `layer-counting`: one key under a fixed window far from full, so every response tells another
//!   count (the `RateLimit` line differs on every response);
//! - `governor-keys`: `layer-keys` through tower_governor's layer instead (governor's keyed GCRA,
//!   no header on an admitted response), the HTTP bench's in-process baseline;
//! - `gcra`, `fixed` or `denied`: a `MemoryStore` decision on one key (GCRA admitted, fixed
//!   window admitted, GCRA refused);
//! - `governor`: governor's keyed `check_key` on one key, admitted: `gcra`'s baseline;
//! - `contended`: not for callgrind: `gcra` and `governor` on two threads at once (or as many as
//!   a third argument says), one key, timed by the wall clock (three rounds each, alternated),
//!   printing the time per decision: what a contended shard lock costs against governor's
//!   compare-and-swap;
//! - `redis-keys`: `layer-keys` on a `RedisStore` without its denial cache (the HTTP bench's
//!   `redis-exact` on `allowed`), 32 requests in flight, on a `redis-server` of its own: the
//!   instructions of this process per request (Redis's own are not counted); `redis-keys-alone`
//!   the same without batching (a call per request), `redis-keys-scripts` with scripts
//!   (`EVALSHA`) instead of functions, `redis-keys-leases` with quota leases (its keys are
//!   never hot: what leases cost the keys they do not lease);
//! - `redis-denied`: `layer-denied` on a `RedisStore` as it comes: refusals answered by its
//!   denial cache (the HTTP bench's `redis` on `abusive`).

use std::convert::Infallible;
use std::time::Duration;

use http::{HeaderValue, Request, Response};
use testkit::governor::XKey;
use tower::{Layer, Service, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_redis_ratelimit::key::{GlobalKey, HeaderKey, Key};
use tower_redis_ratelimit::{
    HeaderFamilies, MemoryStore, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = testkit::args().into_iter();
    let what = args.next().unwrap_or_else(|| "layer".to_owned());
    let n: u64 = args.next().map_or(Ok(100_000), |n| n.parse())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let admitted = match what.as_str() {
        "layer" | "layer-keys" | "layer-keys-bare" | "layer-denied" | "layer-counting" => {
            runtime.block_on(layer(&what, n, MemoryStore::new()))?
        }
        "redis-denied" => {
            let redis = testkit::RedisServer::try_start().map_err(|err| err.to_string())?;
            let store = RedisStore::open(&redis.url())?;
            runtime.block_on(layer("layer-denied", n, store))?
        }
        "governor-keys" => runtime.block_on(governor(n))?,
        "redis-keys" | "redis-keys-alone" | "redis-keys-scripts" | "redis-keys-leases" => {
            let redis = testkit::RedisServer::try_start().map_err(|err| err.to_string())?;
            let mut store = RedisStore::builder(&redis.url())
                .denial_cache(0)
                .batch(what != "redis-keys-alone")
                .functions(what != "redis-keys-scripts");
            if what == "redis-keys-leases" {
                store = store.quota_leases(tower_redis_ratelimit::store::QuotaLeases::default());
            }
            let store = store.build()?;
            runtime.block_on(redis_keys(store, n))?
        }
        "gcra" | "fixed" | "denied" => {
            let _inside = runtime.enter();
            store(&what, n)?
        }
        "governor" => governor_store(n),
        "contended" => {
            let _inside = runtime.enter();
            let threads = args.next().map_or(Ok(2), |threads| threads.parse())?;
            contended(n, threads)?
        }
        other => {
            let known = "layer, layer-keys, layer-keys-bare, layer-denied, layer-counting, governor-keys, \
                         redis-keys, redis-keys-alone, redis-keys-scripts, redis-keys-leases, \
                         redis-denied, gcra, fixed, denied, governor or contended";
            return Err(format!("unknown {other:?}: use {known}").into());
        }
    };
    println!("{admitted} of {n} admitted");
    Ok(())
}

/// A quota no loop reaches.
fn unreachable_quota() -> Quota {
    Quota::new(1_000_000_000, Duration::from_secs(1))
}

/// `n` requests through a `RateLimitLayer` on `store`, shaped by `what` (see the top).
async fn layer(what: &str, n: u64, store: impl Store) -> Result<u64, Box<dyn std::error::Error>> {
    let builder = RateLimitLayer::builder().store(store);
    let limit = match what {
        "layer-keys" | "layer-keys-bare" => builder
            .rule(Rule::gcra(
                "allowed",
                Quota::per_second(1_000_000).with_burst(1_000_000),
            ))
            .key(HeaderKey::new("x-key"))
            .headers(if what == "layer-keys" {
                HeaderFamilies::DEFAULT
            } else {
                HeaderFamilies::NONE
            }),
        "layer-denied" => builder
            .rule(Rule::gcra(
                "abusive",
                Quota::per_second(100).with_burst(100),
            ))
            .key(GlobalKey::new("k")),
        "layer-counting" => builder
            .rule(Rule::fixed_window("api", Quota::per_hour(1_000_000_000)))
            .key(GlobalKey::new("k")),
        _ => builder
            .rule(Rule::gcra("api", unreachable_quota()))
            .key(GlobalKey::new("k")),
    }
    .build()?;
    let service = limit.layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    }));
    let keys = match what {
        "layer-keys" | "layer-keys-bare" => keys()?,
        _ => Vec::new(),
    };
    requests(service, &keys, n).await
}

/// `layer-keys` through tower_governor's layer.
async fn governor(n: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let config = GovernorConfigBuilder::default()
        .key_extractor(XKey)
        .period(Duration::from_micros(1))
        .burst_size(1_000_000)
        .finish()
        .ok_or("tower_governor refused the quota")?;
    let service = GovernorLayer::new(config).layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(axum::body::Body::empty()))
    }));
    requests(service, &keys()?, n).await
}

/// `layer-keys` on `store`, 32 requests in flight (each of 32 tasks sends its next request when
/// the last is answered).
async fn redis_keys(store: RedisStore, n: u64) -> Result<u64, Box<dyn std::error::Error>> {
    const IN_FLIGHT: u64 = 32;
    let limit = RateLimitLayer::builder()
        .rule(Rule::gcra(
            "allowed",
            Quota::per_second(1_000_000).with_burst(1_000_000),
        ))
        .key(HeaderKey::new("x-key"))
        .store(store)
        .build()?;
    let service = limit.layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    }));
    let keys: std::sync::Arc<[HeaderValue]> = keys()?.into();
    let tasks: Vec<_> = (0..IN_FLIGHT)
        .map(|task| {
            let (service, keys) = (service.clone(), keys.clone());
            tokio::spawn(async move {
                let mut admitted = 0;
                for i in (task..n).step_by(IN_FLIGHT as usize) {
                    let mut request = Request::new(());
                    let key = keys[i as usize % keys.len()].clone();
                    request.headers_mut().insert("x-key", key);
                    let response = service.clone().oneshot(request).await?;
                    admitted += u64::from(response.status() == 200);
                }
                Ok::<_, Infallible>(admitted)
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await??;
    }
    Ok(admitted)
}

/// The 10,000 `x-key` values, made before the loop, so that only the request that carries one is
/// counted.
fn keys() -> Result<Vec<HeaderValue>, http::header::InvalidHeaderValue> {
    (0..10_000)
        .map(|i| HeaderValue::from_str(&format!("client-{i}")))
        .collect()
}

/// Sends `n` requests through `service`, each with the next of `keys` in `x-key` (none when there
/// are none), and counts the admitted ones.
async fn requests<S, B>(
    mut service: S,
    keys: &[HeaderValue],
    n: u64,
) -> Result<u64, Box<dyn std::error::Error>>
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible>,
{
    let mut admitted = 0;
    for i in 0..n {
        let mut request = Request::new(());
        if !keys.is_empty() {
            let key = keys[i as usize % keys.len()].clone();
            request.headers_mut().insert("x-key", key);
        }
        let response = service.ready().await?.call(request).await?;
        admitted += u64::from(response.status() == 200);
    }
    Ok(admitted)
}

fn store(what: &str, n: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let rule = match what {
        "fixed" => Rule::fixed_window("api", unreachable_quota()),
        "denied" => Rule::gcra("api", Quota::per_hour(1)),
        _ => Rule::gcra("api", unreachable_quota()),
    };
    let policy = Policy::try_from(rule)?;
    let store = MemoryStore::new();
    let key = Key::from("client-1");
    let mut admitted = 0;
    for _ in 0..n {
        let mut check = store.check(&key, &policy, 1);
        let decision = check
            .take_ready()
            .ok_or("the memory store answers at once")??;
        admitted += u64::from(decision.is_allowed());
    }
    Ok(admitted)
}

/// `gcra`'s loop on governor's keyed limiter, under a quota no loop reaches.
fn governor_store(n: u64) -> u64 {
    let quota = governor::Quota::per_second(std::num::NonZeroU32::new(1_000_000_000).expect("1e9"));
    let limiter = governor::RateLimiter::keyed(quota);
    let key = "client-1".to_owned();
    (0..n)
        .map(|_| u64::from(limiter.check_key(&key).is_ok()))
        .sum()
}

/// `contended`: `n` decisions on each of `threads` threads at once, one key, for the memory store
/// and for governor in turn, three rounds; returns the decisions admitted per thread and round
/// (`n` when all were).
fn contended(n: u64, threads: u64) -> Result<u64, Box<dyn std::error::Error>> {
    const ROUNDS: u64 = 3;
    let policy = Policy::try_from(Rule::gcra("api", unreachable_quota()))?;
    let store = MemoryStore::new();
    let quota = governor::Quota::per_second(std::num::NonZeroU32::new(1_000_000_000).expect("1e9"));
    let limiter = governor::RateLimiter::keyed(quota);
    let admitted = std::sync::atomic::AtomicU64::new(0);
    let timed = |decide: &(dyn Fn() -> bool + Sync)| {
        let started = std::time::Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let passed = (0..n).filter(|_| decide()).count() as u64;
                    admitted.fetch_add(passed, std::sync::atomic::Ordering::Relaxed);
                });
            }
        });
        started.elapsed().as_nanos() as f64 / (n * threads) as f64
    };
    let key = Key::from("client-1");
    let governor_key = "client-1".to_owned();
    for round in 1..=ROUNDS {
        let memory = timed(&|| {
            let mut check = store.check(&key, &policy, 1);
            matches!(check.take_ready(), Some(Ok(decision)) if decision.is_allowed())
        });
        let governor = timed(&|| limiter.check_key(&governor_key).is_ok());
        println!(
            "round {round}: memory {memory:.1} ns, governor {governor:.1} ns per decision \
             ({threads} threads, one key): {:.2}",
            memory / governor
        );
    }
    Ok(admitted.into_inner() / (2 * threads * ROUNDS))
}
