//! Run with: cargo run --example grpc
//!
//! The rate limiter on a tonic gRPC server: `RateLimitLayer` is a tower layer and gRPC is HTTP/2
//! underneath, so it goes on `tonic::transport::Server::builder().layer(...)` as on any tower
//! server. Calls are limited to 3 per 10 seconds per `x-api-key` metadata value; a refused call
//! fails with `RESOURCE_EXHAUSTED`, and its metadata carries what an HTTP client reads in headers
//! (`retry-after`, `ratelimit`, `ratelimit-policy`, `rate-limiting-*`). UtilizationShedRejection and a store that
//! fails closed answer `UNAVAILABLE`.
//!
//! The example starts the server on a free port, then calls it five times as one client and
//! prints what came back.

mod greeter;

use std::time::Duration;

use tonic::transport::{Channel, Server};
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::{Quota, RateLimitLayer, Rule};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limit = RateLimitLayer::builder()
        .rule(Rule::fixed_window(
            "calls",
            Quota::new(3, Duration::from_secs(10)),
        ))
        .key(HeaderKey::new("x-api-key"))
        .build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = Server::builder()
        .layer(limit)
        .add_service(greeter::Greeter)
        .serve_with_incoming(tokio_stream_from(listener));
    tokio::spawn(server);
    println!("grpc: serving demo.Greeter on http://{addr}, 3 calls per 10 s per x-api-key");

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    for call in 1..=5 {
        match greeter::hello(channel.clone(), "grpc", &[("x-api-key", "demo")]).await {
            Ok(response) => println!(
                "call {call}: OK {:?}, ratelimit: {}",
                response.get_ref(),
                metadata(response.metadata(), "ratelimit")
            ),
            Err(status) => println!(
                "call {call}: {:?} {:?}, retry-after: {}, ratelimit: {}",
                status.code(),
                status.message(),
                metadata(status.metadata(), "retry-after"),
                metadata(status.metadata(), "ratelimit")
            ),
        }
    }
    Ok(())
}

fn metadata(map: &tonic::metadata::MetadataMap, key: &str) -> String {
    map.get(key)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-")
        .to_owned()
}

/// The listener's connections as the stream tonic serves.
fn tokio_stream_from(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}
