//! Run with: cargo run -p tower-redis-ratelimit-gateway --example embed -- gateway/examples/proxy.toml
//!
//! The proxy inside a program of your own, rather than the `ratelimit-gateway` binary: bind it,
//! run it, and decide yourself when it leaves and drains (here on Ctrl-C: `/readyz` answers 503
//! for two seconds while requests are still served, then five seconds to finish).

use std::time::Duration;

use ratelimit_gateway::proxy::Proxy;
use ratelimit_gateway::runtime::{BoxError, ShutdownTrigger};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: embed CONFIG_FILE (see gateway/docs/proxy.md)")?;
    let (trigger, shutdown) = ShutdownTrigger::new();
    let proxy = Proxy::bind(path, shutdown).await?;
    // Standard output is the access log's alone, as in the binary.
    eprintln!("{}", proxy.describe()?);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            trigger.leave();
            tokio::time::sleep(Duration::from_secs(2)).await;
            trigger.drain();
            tokio::time::sleep(Duration::from_secs(5)).await;
            trigger.cut();
        }
    });
    proxy.run().await;
    Ok(())
}
