//! What `ratelimit-gateway --version` says: the version, the commit it was built from (by
//! `build.rs`: `unknown` outside a checkout of the repository) and what this build can read and
//! serve, so that a bug report names exactly the program that ran.

/// `0.1.0 (commit 1a2b3c4d5e6f; redis, cluster, sentinel, regions, tls, toml, yaml, json, envoy)`.
///
/// The features are the library's that this crate turns on (its `Cargo.toml`'s dependency
/// line, each of them always: a file may name any store or format), and Envoy's rate limit
/// service.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RATELIMIT_GATEWAY_COMMIT"),
    "; redis, cluster, sentinel, regions, tls, toml, yaml, json, envoy)"
);
