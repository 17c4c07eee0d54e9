//! Connections to a Redis Cluster: redis-rs's async cluster client behind the store's supervisor.
//!
//! Every call touches the keys of one hash slot: a client's keys share its hash tag
//! (`{<client key>}`, and prefixes and rule names may hold no braces), and a batch holds the
//! requests of one slot. So a call runs on the primary of one slot: no CROSSSLOT, and clients
//! spread over the cluster. redis-rs routes each call by its first key, follows MOVED and ASK
//! (resharding) and refreshes its slot map. A node that lacks the function library (a new one,
//! a flushed one) answers that the function is not found, and the store loads it on every
//! primary (`FUNCTION LOAD`); with functions off, `NOSCRIPT` loads the script on every node.
//! Replicas receive the library by replication, so a failover needs no reload. The layer's
//! deadline bounds all of it.

use std::time::Duration;

use futures_util::FutureExt;
use redis::cluster::ClusterClientBuilder;

use super::endpoint::Endpoint;
use super::tls::RedisTls;
use crate::error::{ConfigError, StoreConfigError};
use crate::store::redis::connect::address::parse_all;
use crate::store::redis::connect::connection::{self, Connect, Link};
use crate::store::redis::connect::subscribe;

/// How many times redis-rs retries a call (a redirect, a node reconnecting) before answering its
/// error: few, and quickly, since the layer's deadline is short anyway and a call that cannot be
/// served in it is answered by the failure mode.
const RETRIES: u32 = 3;
const MIN_RETRY_WAIT_MS: u64 = 5;
const MAX_RETRY_WAIT_MS: u64 = 50;

/// The endpoint of a cluster reached through any of `nodes` (one is enough; the client finds
/// the others; the reset listener subscribes on the first that answers). Over TLS, every node,
/// found or given, is reached with `tls`'s certificates.
pub(in crate::store::redis) fn connector(
    nodes: &[String],
    tls: Option<&RedisTls>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    let (infos, shown) = parse_all(nodes, "nodes", tls)?;
    let subscribe = subscribe::to_cluster(infos.clone(), connect_timeout)?;
    let builder = ClusterClientBuilder::new(infos);
    #[cfg(feature = "tls")]
    let builder = match tls {
        Some(tls) => builder.certs(tls.certificates()?),
        None => builder,
    };
    let client = builder
        .connection_timeout(connect_timeout)
        .retries(RETRIES)
        .min_retry_wait(MIN_RETRY_WAIT_MS)
        .max_retry_wait(MAX_RETRY_WAIT_MS)
        .build()
        .map_err(|err| StoreConfigError::Client {
            what: "Redis Cluster",
            reason: err.to_string(),
        })?;
    let connect: Connect = Box::new(move || {
        let client = client.clone();
        // Discovery talks to several nodes: bound the whole of it, not each connection.
        connection::within(connect_timeout, async move {
            client.get_async_connection().await.map(Link::Cluster)
        })
        .boxed()
    });
    Ok(Endpoint {
        connect,
        subscribe,
        shown: format!("Redis Cluster {shown}"),
    })
}
