//! Connecting: where a store's Redis is ([`Target`]: one server by URL or settings, a Cluster,
//! the primary that Sentinels name), what each kind of target connects with
//! ([`Endpoint`](endpoint::Endpoint)), and the one multiplexed connection every call shares,
//! replaced when it breaks ([`SharedConnection`]). Also what connecting needs beside: addresses
//! shown without passwords (`address`), credentials apart from a URL (`RedisAuth`), the reset
//! listener's pub/sub connections (`subscribe`), the certificates of `rediss://` (`tls`, or
//! `no_tls` in a build without the feature: such an address refused), and the hash slot a
//! cluster routes a client's calls by (`slot`).
//!
//! One way down: `target` picks `standalone`, `cluster` or `sentinel`; each makes an
//! [`Endpoint`](endpoint::Endpoint) (declared in a file of its own, so that none of them imports
//! `target` back) from `connection`, `subscribe` and `address`.

mod address;
#[cfg(feature = "sentinel")]
mod auth;
#[cfg(feature = "cluster")]
mod cluster;
pub(super) mod connection;
mod endpoint;
#[cfg(feature = "sentinel")]
mod sentinel;
pub(super) mod slot;
mod standalone;
pub(super) mod subscribe;
mod target;
#[cfg(feature = "tls")]
mod tls;
#[cfg(not(feature = "tls"))]
#[path = "no_tls.rs"]
mod tls;

pub use self::address::redact_url;
#[cfg(test)]
pub(super) use self::address::{describe, refusal};
#[cfg(feature = "sentinel")]
pub use self::auth::RedisAuth;
pub(super) use self::connection::SharedConnection;
#[cfg(test)]
pub(super) use self::standalone::pool;
pub(super) use self::target::{Target, connector};
#[cfg(not(feature = "tls"))]
pub(super) use self::tls::RedisTls;
#[cfg(feature = "tls")]
pub use self::tls::RedisTls;
#[cfg(all(feature = "tls", feature = "config"))]
pub(crate) use self::tls::check as check_tls;
