//! The configuration file: the limits (read by the library's `config` module) and the gateway's
//! own tables, read together in one pass ([`ConfigFile`]), so that a mistake anywhere is named
//! by its path, line and column, or by its field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tower_redis_ratelimit::config::{ConfigFile, LimitsConfig, LoadError};
use tower_redis_ratelimit::key::KeyExtractor;

mod connections;
mod envoy;
mod proxy;
mod relative;
mod serve;
mod size;
mod start_only;

pub use self::connections::{
    AccessLogFormat, Connections, ConnectionsConfig, DEFAULT_DRAIN_DELAY, LogFormat, TlsConfig,
};
pub use self::envoy::{DEFAULT_ENVOY_DEADLINE, EnvoyConfig, EnvoyFilesError, EnvoySettings};
pub use self::proxy::{ProxyConfig, WebSocketsConfig};
pub use self::serve::{DEFAULT_GATEWAYS, ServeConfig};
pub use self::start_only::{StartOnlyField, changed};
use crate::paths::normalise;

/// The gateway's own top-level tables; the limits' tables (`stores`, `policies`, `routes`,
/// `concurrency`, `shadow`) sit beside them.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Tables {
    /// `[proxy]`: what `ratelimit-gateway proxy` runs.
    #[serde(default)]
    pub proxy: Option<ProxyConfig>,
    /// `[serve]`: what `ratelimit-gateway serve` runs.
    #[serde(default)]
    pub serve: Option<ServeConfig>,
}

/// A configuration file, read.
#[derive(Clone, Debug)]
pub struct File {
    /// Where it was read from.
    pub path: PathBuf,
    /// The limits.
    pub limits: LimitsConfig,
    /// The gateway's tables.
    pub tables: Tables,
}

/// A mistake in a field of the gateway's tables found once the file has parsed: printed as
/// `` `proxy.connections.max`: must be at least 1 ``.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {message}")]
pub struct FieldError {
    /// The field, as a path of names (`proxy.upstream`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// The mistake `message` in `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why a configuration file cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// It cannot be read or parsed (the message says `path:line:column`).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A limit is wrong (a policy that does not exist, a limit of 0).
    #[error("{}: {error}", path.display())]
    Limits {
        /// The file.
        path: PathBuf,
        /// The mistake, named by its field.
        error: tower_redis_ratelimit::ConfigError,
    },
    /// A field of the gateway's tables is wrong.
    #[error("{}: {error}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The mistake.
        error: FieldError,
    },
    /// envoyproxy/ratelimit's files that `[serve.envoy] files` names are wrong (the message
    /// names the YAML file and its field).
    #[error(transparent)]
    Envoy(#[from] EnvoyFilesError),
}

impl File {
    /// Reads the file at `path` (`.toml`, `.yaml` or `.yml`, `.json`), and checks what can be
    /// checked without building anything: the routes' paths are normalised paths. The paths it
    /// names (TLS files, the upstream's CA, the socket, the Envoy files) are relative to its
    /// directory.
    pub fn read(path: impl AsRef<Path>) -> Result<File, FileError> {
        let path = path.as_ref().to_owned();
        let ConfigFile {
            limits, mut tables, ..
        } = ConfigFile::<Tables>::from_file(&path)?;
        tables.resolve_paths(path.parent().unwrap_or(Path::new("")));
        let file = File {
            path,
            limits,
            tables,
        };
        file.check_paths()
            .map_err(|error| file.field_error(error))?;
        Ok(file)
    }

    /// `error` as this file's.
    pub fn field_error(&self, error: FieldError) -> FileError {
        FileError::Field {
            path: self.path.clone(),
            error,
        }
    }

    /// `error` of the limits as this file's.
    pub fn limits_error(&self, error: tower_redis_ratelimit::ConfigError) -> FileError {
        FileError::Limits {
            path: self.path.clone(),
            error,
        }
    }

    /// Each route's key extractor, by route name, for the access log's key digest (a route
    /// whose key does not build has none: building its limits says why).
    pub fn route_keys(&self) -> BTreeMap<String, Arc<dyn KeyExtractor>> {
        self.limits
            .routes
            .iter()
            .filter_map(|(name, route)| Some((name.clone(), route.key.extractor().ok()?)))
            .collect()
    }

    /// Requests are matched on their normalised path: a prefix that is not one would never
    /// match, or match less than it says; and a route (or concurrency limit) without paths
    /// would limit nothing here, where paths are how a request finds its limits.
    fn check_paths(&self) -> Result<(), FieldError> {
        let routes = self
            .limits
            .routes
            .iter()
            .map(|(name, route)| (format!("routes.{name}.paths"), &route.paths));
        let concurrency = self
            .limits
            .concurrency
            .iter()
            .map(|(name, limit)| (format!("concurrency.{name}.paths"), &limit.paths));
        for (field, paths) in routes.chain(concurrency) {
            if paths.is_empty() {
                return Err(FieldError::new(
                    field,
                    "missing: the gateway limits a request by the routes of its path, so a \
                     limit without `paths` would limit nothing (write e.g. `paths = [\"/\"]` \
                     for every path)",
                ));
            }
            for (index, path) in paths.iter().enumerate() {
                let field = || format!("{field}[{index}]");
                match normalise(path) {
                    Ok(normal) if normal == path.as_str() => {}
                    Ok(normal) => {
                        return Err(FieldError::new(
                            field(),
                            format!(
                                "{path:?} is not a normalised path, and requests are matched \
                                 normalised: write {normal:?}"
                            ),
                        ));
                    }
                    Err(err) => return Err(FieldError::new(field(), format!("{path:?}: {err}"))),
                }
            }
        }
        Ok(())
    }
}
