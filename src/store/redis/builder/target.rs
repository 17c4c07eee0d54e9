//! [`Target`]: where a store connects, and the [`Endpoint`] made of it: how decisions connect,
//! how the reset listener subscribes, and how logs show the target.

use std::time::Duration;

use deadpool_redis::{ConnectionAddr, ConnectionInfo, Manager, Pool, Runtime};
use redis::{AsyncConnectionConfig, IntoConnectionInfo};

use crate::error::{ConfigError, StoreConfigError};
use crate::store::redis::address::{describe, redact_url};
#[cfg(feature = "cluster")]
use crate::store::redis::cluster;
use crate::store::redis::connection::{self, Connect};
use crate::store::redis::reset::subscribe::{self, Subscribe};
#[cfg(feature = "sentinel")]
use crate::store::redis::sentinel;

/// Where a store connects.
pub(in crate::store::redis) enum Target {
    /// A URL, parsed at `build()`.
    Url(String),
    /// Connection settings from a `deadpool_redis::Config`.
    Connection(ConnectionInfo),
    /// A `deadpool_redis::Config` that sets both `url` and `connection`: refused at `build()`.
    UrlAndConnection,
    /// A Redis Cluster, through any of these node URLs.
    #[cfg(feature = "cluster")]
    Cluster(Vec<String>),
    /// The primary that the sentinels at these URLs name `master`, reached with `primary_auth`
    /// when set (else with the first URL's credentials).
    #[cfg(feature = "sentinel")]
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        primary_auth: Option<crate::store::redis::RedisAuth>,
    },
}

/// What a store connects with.
pub(in crate::store::redis) struct Endpoint {
    /// Makes the connection every decision shares.
    pub(in crate::store::redis) connect: Connect,
    /// Makes the reset listener's pub/sub connection.
    pub(in crate::store::redis) subscribe: Subscribe,
    /// The target, without passwords: `redacted_url`.
    pub(in crate::store::redis) shown: String,
}

/// What makes the connections to `target`, and how to show it without passwords.
pub(in crate::store::redis) fn connector(
    target: Target,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    let (info, shown) = match target {
        #[cfg(feature = "cluster")]
        Target::Cluster(nodes) => return cluster::connector(&nodes, connect_timeout),
        #[cfg(feature = "sentinel")]
        Target::Sentinel {
            sentinels,
            master,
            primary_auth,
        } => {
            return sentinel::connector(
                &sentinels,
                &master,
                primary_auth.as_ref(),
                connect_timeout,
            );
        }
        Target::Url(url) => {
            let shown = redact_url(&url);
            let info = url.as_str().into_connection_info().map_err(|err| {
                StoreConfigError::InvalidUrl {
                    setting: "url",
                    url: shown.clone(),
                    reason: err.to_string(),
                }
            })?;
            (info, shown)
        }
        Target::Connection(info) => {
            let shown = describe(&info);
            match &info.addr {
                ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. }
                    if host.is_empty() =>
                {
                    return Err(StoreConfigError::NoHost { address: shown }.into());
                }
                _ => {}
            }
            (info.into(), shown)
        }
        Target::UrlAndConnection => {
            return Err(StoreConfigError::UrlAndConnection.into());
        }
    };
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
