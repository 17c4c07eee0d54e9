//! Connections to the primary that a set of Redis Sentinels names, followed across failovers.
//!
//! Each connection asks the sentinels for the primary's address (redis-rs checks the server's
//! `ROLE` before using it). The supervisor drops a connection that answers READONLY or
//! MASTERDOWN (a demoted primary after `SENTINEL FAILOVER`) or that fails (a killed primary), so
//! the next call connects again and finds the primary the sentinels elected, after its backoff.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use redis::AsyncConnectionConfig;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};

use super::auth::RedisAuth;
use super::endpoint::Endpoint;
use crate::error::{ConfigError, StoreConfigError};
use crate::store::redis::connect::address::parse_all;
use crate::store::redis::connect::connection::{self, Connect, Link};
use crate::store::redis::connect::subscribe;

/// The endpoint of the primary named `master` by the sentinels at `sentinels`. Each sentinel is
/// asked with its URL's credentials; the data nodes are reached with the first URL's database,
/// and with `primary_auth` when given, else with that URL's user name and password. The reset
/// listener subscribes on the primary too, as the data nodes are reached.
pub(in crate::store::redis) fn connector(
    sentinels: &[String],
    master: &str,
    primary_auth: Option<&RedisAuth>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    let (infos, shown) = parse_all(sentinels, "sentinels")?;
    if master.is_empty() {
        return Err(StoreConfigError::NoMaster.into());
    }
    let first = infos[0].redis_settings();
    let data_nodes = match primary_auth {
        Some(auth) => auth.apply(first),
        None => first.clone(),
    };
    let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(data_nodes);
    let client = SentinelClient::build(
        infos,
        master.to_owned(),
        Some(node),
        SentinelServerType::Master,
    )
    .map_err(|err| StoreConfigError::Client {
        what: "Redis Sentinel",
        reason: err.to_string(),
    })?;
    // Asking the sentinels needs the client mutably; connections are made one at a time anyway.
    let client = Arc::new(tokio::sync::Mutex::new(client));
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(None);
    let subscribe = subscribe::to_sentinel(client.clone(), connect_timeout);
    let connect: Connect = Box::new(move || {
        let (client, config) = (client.clone(), config.clone());
        // The sentinels, then the primary: bound the whole of it.
        connection::within(connect_timeout, async move {
            let mut client = client.lock().await;
            let connection = client.get_async_connection_with_config(&config).await?;
            Ok(Link::Server(connection))
        })
        .boxed()
    });
    Ok(Endpoint {
        connect,
        subscribe,
        shown: format!("Redis Sentinel {shown} (primary {master})"),
    })
}
