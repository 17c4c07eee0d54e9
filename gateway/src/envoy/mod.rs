//! Envoy's rate limit service (RLS v3, `envoy.service.ratelimit.v3.RateLimitService`) over the
//! configuration files of envoyproxy/ratelimit, read unchanged: Envoy, Istio, Envoy Gateway,
//! Contour and kgateway switch to it by changing one address. `docs/envoy.md` in the repository
//! is the guide: what is the same as the reference, what differs and why, and the Envoy and
//! Istio configuration that points at it.
//!
//! - [`file`](mod@file): the YAML files as written, and the gateway's extensions (`extensions:` keys).
//! - [`config`]: the reference's validation, and each domain's descriptor tree.
//! - [`limit`]: a `rate_limit`, its units and extensions.
//! - [`matching`]: which limit a descriptor gets (most specific first, wildcards, `replaces`).
//! - `budget`: the caller's `grpc-timeout`, and the store deadline it leaves.
//! - `decide`: one request decided, its descriptors all or nothing, in the domain's store;
//!   `status`: the answer Envoy gets.
//! - [`metrics`]: the reference's per-descriptor counters.
//! - [`RateLimitService`]: the tonic service, mounted by a listener under [`PATH_PREFIX`].
//! - [`watch`]: a reload when the files change.

mod budget;
pub mod config;
mod decide;
pub mod file;
pub mod limit;
pub mod matching;
pub mod metrics;
mod service;
mod status;
pub mod watch;

use std::path::PathBuf;

pub use self::decide::{MAX_DESCRIPTORS, Settings};
pub use self::service::{PATH_PREFIX, RateLimitService};
use crate::config::FieldError;

/// Why the Envoy files cannot be used; each names its file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesError {
    /// A file or directory cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not YAML of the expected shape (the message names the field and the line).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What serde said.
        message: String,
    },
    /// A field is wrong.
    #[error("{}: {error}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The field and the mistake.
        error: FieldError,
    },
    /// The store a domain names is not one of the configuration file's.
    #[error("{}: {error}", path.display())]
    Store {
        /// The file.
        path: PathBuf,
        /// The mistake, named by its field (`extensions.store`).
        error: tower_redis_ratelimit::ConfigError,
    },
}
