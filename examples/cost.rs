//! Run with: cargo build --release --example cost && valgrind --tool=callgrind target/release/examples/cost <what> <n>
//!
//! A tight loop of `n` decisions, for counting instructions: callgrind counts the same number
//! whatever else the machine does, so two builds compare exactly where wall-clock benchmarks on a
//! shared machine differ by a fifth. Run each build at two `n` and divide the difference by the
//! difference of the `n`: start-up, and the one-time calibration of the clock (which varies from
//! run to run), drop out. `docs/performance.md` has the numbers.
//!
//! `<what>`:
//! - `layer`: a request through a `RateLimitLayer` on a `MemoryStore` (GCRA, one key, admitted);
//! - `gcra`, `fixed` or `denied`: a `MemoryStore` decision on one key (GCRA admitted, fixed
//!   window admitted, GCRA refused).

use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response};
use tower::{Layer, Service, ServiceExt};
use tower_redis_ratelimit::key::{GlobalKey, Key};
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, RateLimitLayer, Rule, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "layer".to_owned());
    let n: u64 = args.next().map_or(Ok(100_000), |n| n.parse())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let admitted = match what.as_str() {
        "layer" => runtime.block_on(layer(n))?,
        "gcra" | "fixed" | "denied" => {
            let _inside = runtime.enter();
            store(&what, n)?
        }
        other => return Err(format!("unknown {other:?}: use layer, gcra, fixed or denied").into()),
    };
    println!("{admitted} of {n} admitted");
    Ok(())
}

/// A quota no loop reaches.
fn unreachable_quota() -> Quota {
    Quota::new(1_000_000_000, Duration::from_secs(1))
}

async fn layer(n: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let limit = RateLimitLayer::builder()
        .rule(Rule::gcra("api", unreachable_quota()))
        .key(GlobalKey::new("k"))
        .build()?;
    let mut service = limit.layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    }));
    let mut admitted = 0;
    for _ in 0..n {
        let response = service.ready().await?.call(Request::new(())).await?;
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
