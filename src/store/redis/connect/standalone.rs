//! Connections to one Redis server, by URL or connection settings: a deadpool-redis pool makes
//! them (the supervisor in `connection` keeps one and replaces it when it breaks).

use std::time::Duration;

use deadpool_redis::{ConnectionAddr, ConnectionInfo, Manager, Pool, Runtime};
use redis::AsyncConnectionConfig;

use super::address::{describe, parse, redact_url};
use super::connection;
use super::endpoint::Endpoint;
use super::subscribe;
use super::tls::{self, RedisTls};
use crate::error::{ConfigError, StoreConfigError};

/// The endpoint of the server at `url`.
pub(super) fn from_url(
    url: &str,
    tls: Option<&RedisTls>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    endpoint(parse(url, "url")?, redact_url(url), tls, connect_timeout)
}

/// The endpoint of the server that connection settings (a `deadpool_redis::Config`'s) name.
pub(super) fn from_settings(
    info: ConnectionInfo,
    tls: Option<&RedisTls>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    let shown = describe(&info);
    match &info.addr {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } if host.is_empty() => {
            return Err(StoreConfigError::NoHost { address: shown }.into());
        }
        _ => {}
    }
    endpoint(info.into(), shown, tls, connect_timeout)
}

/// The endpoint of the server `info` names, shown as `shown`: decisions and the reset
/// listener's subscription both over TLS when `info` is a `rediss://` address.
fn endpoint(
    info: redis::ConnectionInfo,
    shown: String,
    tls: Option<&RedisTls>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    let info = tls::secure(info, tls, &shown)?;
    if !info.addr().is_supported() {
        return Err(StoreConfigError::Unsupported { address: shown }.into());
    }
    let subscribe = subscribe::to_server(info.clone(), connect_timeout)?;
    let pool = pool(info, connect_timeout)?;
    Ok(Endpoint {
        connect: connection::from_pool(pool),
        subscribe,
        shown,
    })
}

/// The pool that makes the store's connections, each bounded by `connect_timeout`, with no
/// response timeout (a call is bounded by the layer's deadline, and a silent connection is
/// caught by `stale_after`).
pub(in crate::store::redis) fn pool(
    info: redis::ConnectionInfo,
    connect_timeout: Duration,
) -> Result<Pool, ConfigError> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(None);
    let manager =
        Manager::new_with_config(info, config).map_err(|err| StoreConfigError::Client {
            what: "Redis connection",
            reason: err.to_string(),
        })?;
    Pool::builder(manager)
        .max_size(2)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(connect_timeout))
        .wait_timeout(Some(connect_timeout))
        .build()
        .map_err(|err| {
            StoreConfigError::Client {
                what: "Redis pool",
                reason: err.to_string(),
            }
            .into()
        })
}
