//! What the tests and the benchmarks of `tower-redis-ratelimit` share, so that each is written
//! once:
//!
//! - private Redis servers: a standalone [`RedisServer`], a [`cluster::RedisCluster`] and a
//!   [`sentinel::RedisSentinels`] set, each on free loopback ports, with saving off and in a
//!   temporary directory of its own, stopped and removed when dropped;
//! - [`commands`]: how many commands a server ran, read on a connection of the caller's own;
//! - [`load`]: a closed-loop HTTP/1.1 load generator;
//! - [`traces`]: seeded request traces for the algorithm studies.
//!
//! It does not depend on the crate under test, so the crate's own unit tests may use it too.

pub mod cluster;
pub mod commands;
pub mod load;
pub mod sentinel;
mod server;
mod temp_dir;
pub mod traces;

pub use server::{RedisServer, find_binary, free_port};
pub use temp_dir::TempDir;

/// Errors of a benchmark run: each says what failed in words a user can act on.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
