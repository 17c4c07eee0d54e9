//! Connections to the primary that a set of Redis Sentinels names, followed across failovers.
//!
//! Each connection asks the sentinels for the primary's address (redis-rs checks the server's
//! `ROLE` before using it). The supervisor drops a connection that answers READONLY or
//! MASTERDOWN (a demoted primary after `SENTINEL FAILOVER`) or that fails (a killed primary), so
//! the next call connects again and finds the primary the sentinels elected, after its backoff.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionAddr, TlsMode};

use super::auth::RedisAuth;
use super::endpoint::Endpoint;
use super::tls::RedisTls;
use crate::error::{ConfigError, StoreConfigError};
use crate::store::redis::connect::address::parse_all;
use crate::store::redis::connect::connection::{self, Connect, Link};
use crate::store::redis::connect::subscribe;

/// The endpoint of the primary named `master` by the sentinels at `sentinels`. Each sentinel is
/// asked with its URL's credentials; the data nodes are reached with the first URL's database,
/// and with `primary_auth` when given, else with that URL's user name and password. The reset
/// listener subscribes on the primary too, as the data nodes are reached. Sentinels on
/// `rediss://` URLs name data nodes reached over TLS too, verified as the sentinels are.
pub(in crate::store::redis) fn connector(
    sentinels: &[String],
    master: &str,
    primary_auth: Option<&RedisAuth>,
    tls: Option<&RedisTls>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    let (infos, shown) = parse_all(sentinels, "sentinels", tls)?;
    if master.is_empty() {
        return Err(StoreConfigError::NoMaster.into());
    }
    let first = infos[0].redis_settings();
    let data_nodes = match primary_auth {
        Some(auth) => auth.apply(first),
        None => first.clone(),
    };
    let client = match tls {
        #[cfg(feature = "tls")]
        Some(tls) => with_certificates(&infos, master, &data_nodes, tls)?,
        _ => {
            let mut node =
                SentinelNodeConnectionInfo::default().set_redis_connection_info(data_nodes);
            if matches!(infos[0].addr(), ConnectionAddr::TcpTls { .. }) {
                node = node.set_tls_mode(TlsMode::Secure);
            }
            // A `String` without redis-rs's `tls-rustls`, any `AsRef<str>` with it.
            let name: String = master.into();
            SentinelClient::build(infos, name, Some(node), SentinelServerType::Master)
                .map_err(client_error)?
        }
    };
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

/// A sentinel client whose data nodes are verified with the store's own certificates, which
/// redis-rs takes only through its builder. The builder asks every sentinel with one user name
/// and password: sentinel URLs whose credentials differ are refused rather than sent another's.
#[cfg(feature = "tls")]
fn with_certificates(
    sentinels: &[redis::ConnectionInfo],
    master: &str,
    data_nodes: &redis::RedisConnectionInfo,
    tls: &RedisTls,
) -> Result<SentinelClient, ConfigError> {
    use redis::sentinel::SentinelClientBuilder;

    let first = sentinels[0].redis_settings();
    let same = |info: &redis::ConnectionInfo| {
        let settings = info.redis_settings();
        settings.username() == first.username() && settings.password() == first.password()
    };
    if !sentinels.iter().all(same) {
        return Err(StoreConfigError::Client {
            what: "Redis Sentinel",
            reason: "with TLS certificates every sentinel is asked with one user name and \
                     password: give every sentinel URL the same"
                .to_owned(),
        }
        .into());
    }
    let addresses = sentinels.iter().map(|info| info.addr().clone());
    let mut builder = SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)
        .map_err(client_error)?
        .set_client_to_sentinel_protocol(first.protocol())
        .set_client_to_redis_tls_mode(TlsMode::Secure)
        .set_client_to_redis_certificates(tls.certificates()?)
        .set_client_to_redis_db(data_nodes.db())
        .set_client_to_redis_protocol(data_nodes.protocol());
    if let Some(username) = first.username() {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = first.password() {
        builder = builder.set_client_to_sentinel_password(password);
    }
    if let Some(username) = data_nodes.username() {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = data_nodes.password() {
        builder = builder.set_client_to_redis_password(password);
    }
    builder.build().map_err(client_error)
}

fn client_error(err: redis::RedisError) -> ConfigError {
    StoreConfigError::Client {
        what: "Redis Sentinel",
        reason: err.to_string(),
    }
    .into()
}
