//! The cost of one rate-limit decision, with the baselines it is judged against.
//!
//! - `memory/*`: one `MemoryStore` decision, on one hot key and across 100 000 keys, next to
//!   governor's keyed `check_key` on the same keys (the target: at most 1.5 times governor).
//! - `redis/*`: one `RedisStore` decision over loopback next to a bare `PING` on a redis-rs
//!   multiplexed connection to the same server (a round trip with no work): the difference is
//!   what the script and the crate cost. Also 64 decisions in flight at once next to 64 PINGs.
//! - `layer/*`: a whole request through `RateLimitLayer` on a memory store, next to the same
//!   service without the layer.
//!
//! Run with `cargo bench --bench check`; results and the machine they were measured on are in
//! docs/performance.md. The Redis group starts its own `redis-server` on a free port.

use std::convert::Infallible;
use std::hint::black_box;
use std::num::NonZeroU32;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures_util::future::join_all;
use governor::{Quota as GovernorQuota, RateLimiter};
use http::{Request, Response};
use testkit::RedisServer;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
use tower_redis_ratelimit::key::{GlobalKey, Key};
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, RedisStore, Rule, Store};
/// Enough keys that they do not fit in the CPU caches together.
const MANY_KEYS: usize = 100_000;

/// A quota no benchmark exhausts, so every decision takes the admitting path (which writes).
fn open_policy(algorithm: fn(&'static str, Quota) -> Rule) -> Policy {
    Policy::try_from(algorithm("bench", Quota::per_second(1_000_000_000))).expect("valid policy")
}

fn governor_quota() -> GovernorQuota {
    GovernorQuota::per_second(NonZeroU32::new(1_000_000_000).expect("non-zero"))
}

fn keys() -> Vec<Key> {
    (0..MANY_KEYS)
        .map(|i| Key::from(format!("client-{i}")))
        .collect()
}

fn memory(c: &mut Criterion) {
    // Inside a Tokio runtime, as the layer always calls the store: there the store's check for its
    // background sweep is one load (outside any runtime it would look for one now and then).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let _inside = runtime.enter();
    let mut group = c.benchmark_group("memory");
    let keys = keys();
    let hot = keys[0].clone();

    let store = MemoryStore::new();
    let gcra = open_policy(Rule::gcra);
    let fixed = open_policy(Rule::fixed_window);
    // Warm the store so the many-keys runs measure lookups and updates, not first inserts.
    for key in &keys {
        let _ = store.check(key, &gcra, 1).take_ready();
        let _ = store.check(key, &fixed, 1).take_ready();
    }
    group.bench_function("gcra/hot_key", |b| {
        b.iter(|| black_box(store.check(black_box(&hot), &gcra, 1).take_ready()))
    });
    group.bench_function("fixed_window/hot_key", |b| {
        b.iter(|| black_box(store.check(black_box(&hot), &fixed, 1).take_ready()))
    });
    let mut next = keys.iter().cycle();
    group.bench_function("gcra/many_keys", |b| {
        b.iter(|| {
            black_box(
                store
                    .check(next.next().expect("cycle"), &gcra, 1)
                    .take_ready(),
            )
        })
    });

    let limited = Policy::try_from(Rule::gcra("denied", Quota::per_hour(1))).expect("valid policy");
    let _ = store.check(&hot, &limited, 1).take_ready();
    group.bench_function("gcra/hot_key_denied", |b| {
        b.iter(|| black_box(store.check(black_box(&hot), &limited, 1).take_ready()))
    });

    let governor = RateLimiter::keyed(governor_quota());
    for key in &keys {
        let _ = governor.check_key(key);
    }
    group.bench_function("governor/hot_key", |b| {
        b.iter(|| black_box(governor.check_key(black_box(&hot))))
    });
    let mut next = keys.iter().cycle();
    group.bench_function("governor/many_keys", |b| {
        b.iter(|| black_box(governor.check_key(next.next().expect("cycle"))))
    });
    group.finish();
}

fn layer(c: &mut Criterion) {
    let mut group = c.benchmark_group("layer");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let handler = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let limit = RateLimitLayer::builder()
        .policy(&open_policy(Rule::gcra))
        .key(GlobalKey::new("bench"))
        .build()
        .expect("valid layer");
    let mut limited = ServiceBuilder::new().layer(limit).service(handler);
    let mut bare = handler;
    group.bench_function("memory_gcra", |b| {
        b.iter(|| {
            let call = async { limited.ready().await?.call(Request::new(())).await };
            black_box(runtime.block_on(call).expect("infallible"))
        })
    });
    group.bench_function("no_layer", |b| {
        b.iter(|| {
            let call = async { bare.ready().await?.call(Request::new(())).await };
            black_box(runtime.block_on(call).expect("infallible"))
        })
    });
    group.finish();
}

fn redis(c: &mut Criterion) {
    let server = RedisServer::start();
    let url = server.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let store = runtime.block_on(async {
        let store = RedisStore::open(&url).expect("valid url");
        // The first check connects and loads the script.
        store
            .check(&Key::from_static("warm"), &open_policy(Rule::gcra), 1)
            .await
            .expect("redis answers");
        store
    });
    let connection = runtime.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("valid url");
        client
            .get_multiplexed_async_connection()
            .await
            .expect("redis answers")
    });
    let gcra = open_policy(Rule::gcra);
    let fixed = open_policy(Rule::fixed_window);
    let hot = Key::from_static("client-0");
    let keys = keys();

    let mut group = c.benchmark_group("redis");
    group.bench_function("ping", |b| {
        b.to_async(&runtime).iter(|| {
            let mut connection = connection.clone();
            async move {
                let pong: String = redis::cmd("PING")
                    .query_async(&mut connection)
                    .await
                    .expect("redis answers");
                black_box(pong)
            }
        })
    });
    group.bench_function("gcra/hot_key", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(store.check(&hot, &gcra, 1).await.expect("redis answers")) })
    });
    group.bench_function("fixed_window/hot_key", |b| {
        b.to_async(&runtime).iter(|| async {
            black_box(store.check(&hot, &fixed, 1).await.expect("redis answers"))
        })
    });
    let mut next = keys.iter().cycle();
    group.bench_function("gcra/many_keys", |b| {
        b.to_async(&runtime).iter_batched(
            || next.next().expect("cycle").clone(),
            |key| {
                let check = store.check(&key, &gcra, 1);
                async move { black_box(check.await.expect("redis answers")) }
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("ping_64_in_flight", |b| {
        b.to_async(&runtime).iter(|| {
            join_all((0..64).map(|_| {
                let mut connection = connection.clone();
                async move {
                    let pong: String = redis::cmd("PING")
                        .query_async(&mut connection)
                        .await
                        .expect("redis answers");
                    pong
                }
            }))
        })
    });
    group.bench_function("gcra_64_in_flight", |b| {
        b.to_async(&runtime)
            .iter(|| join_all(keys[..64].iter().map(|key| store.check(key, &gcra, 1))))
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, memory, layer, redis);
criterion_main!(benches);
