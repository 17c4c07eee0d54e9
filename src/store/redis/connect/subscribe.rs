//! [`Subscribe`]: how a store's listener makes its pub/sub connection, per topology. A
//! connection of its own (RESP2 pub/sub), apart from the one decisions share, so that neither
//! waits for the other and a subscription never changes how decisions are sent.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use redis::aio::PubSub;
use redis::{Client, ConnectionInfo, RedisResult};

use crate::error::{ConfigError, StoreConfigError};

/// Makes one pub/sub connection, within the store's connect timeout.
pub(in crate::store::redis) type Subscribe =
    Box<dyn Fn() -> BoxFuture<'static, RedisResult<PubSub>> + Send + Sync>;

/// Subscribes on one server: standalone.
pub(in crate::store::redis) fn to_server(
    info: ConnectionInfo,
    timeout: Duration,
) -> Result<Subscribe, ConfigError> {
    let client = client(info)?;
    Ok(Box::new(move || {
        let client = client.clone();
        async move { within(timeout, client.get_async_pubsub()).await }.boxed()
    }))
}

/// Subscribes on any node of a cluster, the first of `nodes` that answers: a PUBLISH reaches
/// every node (replicas included) over the cluster bus, so any one hears every reset.
#[cfg(feature = "cluster")]
pub(in crate::store::redis) fn to_cluster(
    nodes: Vec<ConnectionInfo>,
    timeout: Duration,
) -> Result<Subscribe, ConfigError> {
    let clients: Vec<Client> = nodes.into_iter().map(client).collect::<Result<_, _>>()?;
    Ok(Box::new(move || {
        let clients = clients.clone();
        async move {
            let mut failed = None;
            for client in clients {
                match within(timeout, client.get_async_pubsub()).await {
                    Ok(pubsub) => return Ok(pubsub),
                    Err(err) => failed = Some(err),
                }
            }
            Err(failed.unwrap_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Client, "a cluster without nodes"))
            }))
        }
        .boxed()
    }))
}

/// Subscribes on the primary the sentinels name now (a replica would hear the resets too, but
/// the primary is the server the store knows to be alive).
#[cfg(feature = "sentinel")]
pub(in crate::store::redis) fn to_sentinel(
    sentinel: std::sync::Arc<tokio::sync::Mutex<redis::sentinel::SentinelClient>>,
    timeout: Duration,
) -> Subscribe {
    Box::new(move || {
        let sentinel = sentinel.clone();
        async move {
            within(timeout, async move {
                let client = sentinel.lock().await.async_get_client().await?;
                client.get_async_pubsub().await
            })
            .await
        }
        .boxed()
    })
}

fn client(info: ConnectionInfo) -> Result<Client, ConfigError> {
    Client::open(info).map_err(|err| {
        StoreConfigError::Client {
            what: "Redis connection",
            reason: err.to_string(),
        }
        .into()
    })
}

/// `call`, or a timeout error after `timeout` (a frozen server, a partition: TCP stays open).
pub(in crate::store::redis) async fn within<T>(
    timeout: Duration,
    call: impl std::future::Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer within the time allowed",
            )))
        })
}
