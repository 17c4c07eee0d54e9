//! [`Target`]: where a store connects, and the [`Endpoint`] made of it by the module of its kind
//! (`standalone`, `cluster`, `sentinel`).

use std::time::Duration;

use deadpool_redis::ConnectionInfo;

#[cfg(feature = "cluster")]
use super::cluster;
use super::endpoint::Endpoint;
#[cfg(feature = "sentinel")]
use super::sentinel;
use super::standalone;
use super::tls::RedisTls;
use crate::error::{ConfigError, StoreConfigError};

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
        primary_auth: Option<super::RedisAuth>,
    },
}

/// What makes the connections to `target`, and how to show it without passwords.
/// Over TLS with `tls`'s certificates when they are given (`rediss://` addresses only).
pub(in crate::store::redis) fn connector(
    target: Target,
    tls: Option<&RedisTls>,
    connect_timeout: Duration,
) -> Result<Endpoint, ConfigError> {
    match target {
        #[cfg(feature = "cluster")]
        Target::Cluster(nodes) => cluster::connector(&nodes, tls, connect_timeout),
        #[cfg(feature = "sentinel")]
        Target::Sentinel {
            sentinels,
            master,
            primary_auth,
        } => sentinel::connector(
            &sentinels,
            &master,
            primary_auth.as_ref(),
            tls,
            connect_timeout,
        ),
        Target::Url(url) => standalone::from_url(&url, tls, connect_timeout),
        Target::Connection(info) => standalone::from_settings(info, tls, connect_timeout),
        Target::UrlAndConnection => Err(StoreConfigError::UrlAndConnection.into()),
    }
}
