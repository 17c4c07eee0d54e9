//! A file loaded for the proxy: its `[proxy]` table's settings and the built limits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tower_redis_ratelimit::ConcurrencyLimitLayer;
use tower_redis_ratelimit::config::Limits;
use tower_redis_ratelimit::key::KeyExtractor;

use super::upstream::Upstream;
use crate::config::{Connections, FieldError, File, FileError, ProxyConfig};
use crate::runtime::{AdminAccess, tls};

/// How long the upstream may take to start its answer unless the file says otherwise: as long
/// as common proxies wait (nginx's `proxy_read_timeout`).
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// A file loaded for the proxy: its settings and the built limits.
pub struct Loaded {
    /// The `[proxy]` table.
    pub table: ProxyConfig,
    /// `[proxy.connections]` with its defaults.
    pub connections: Connections,
    /// The upstream timeout with its default.
    pub upstream_timeout: Duration,
    /// The upstream and a client for it.
    pub(crate) upstream: Upstream,
    /// TLS on the listener.
    pub(crate) tls: Option<tls::Certified>,
    /// The limits, built.
    pub limits: Limits,
    /// The WebSocket limit, counted in the limits' store.
    pub websockets: Option<ConcurrencyLimitLayer>,
    /// Each route's key extractor, by route name, for the access log.
    pub(crate) keys: BTreeMap<String, Arc<dyn KeyExtractor>>,
    /// Who may reset on the admin address.
    pub admin_access: AdminAccess,
}

/// Checks and builds `file` for the proxy; on a reload, keeping the stores of `previous` whose
/// settings did not change (their counts, their connections and the permits held in them).
pub fn load(file: &File, previous: Option<&Limits>) -> Result<Loaded, FileError> {
    let table = file.tables.proxy.clone().ok_or_else(|| {
        file.field_error(FieldError::new(
            "proxy",
            "no [proxy] table: `proxy` needs at least `listen` and `upstream`",
        ))
    })?;
    let connections = table
        .connections
        .settings("proxy.connections")
        .map_err(|err| file.field_error(err))?;
    let admin_access = AdminAccess::new("proxy", table.admin, table.admin_token.as_deref())
        .map_err(|err| file.field_error(err))?;
    let upstream_timeout = table.upstream_timeout.unwrap_or(DEFAULT_UPSTREAM_TIMEOUT);
    if upstream_timeout.is_zero() {
        return Err(file.field_error(FieldError::new(
            "proxy.upstream_timeout",
            "must be longer than 0",
        )));
    }
    let upstream = Upstream::new(
        &table.upstream,
        table.upstream_ca.as_deref(),
        connections.workers,
    )
    .map_err(|err| file.field_error(err))?;
    let tls = match &table.tls {
        Some(config) => Some(
            tls::certified(&config.certificate, &config.private_key)
                .map_err(|err| file.field_error(FieldError::new("proxy.tls", err)))?,
        ),
        None => None,
    };
    let limits = match previous {
        Some(previous) => file.limits.rebuild(previous),
        None => file.limits.build(),
    }
    .map_err(|err| file.limits_error(err))?;
    let websockets = match &table.websockets {
        Some(websockets) if websockets.max_per_key == 0 => {
            return Err(file.field_error(FieldError::new(
                "proxy.websockets.max_per_key",
                "must be at least 1",
            )));
        }
        Some(websockets) => Some(
            limits
                .concurrency_limit("websockets", "proxy.websockets", &websockets.limit())
                .map_err(|err| file.limits_error(err))?,
        ),
        None => None,
    };
    let keys = file.route_keys();
    Ok(Loaded {
        keys,
        admin_access,
        table,
        connections,
        upstream_timeout,
        upstream,
        tls,
        limits,
        websockets,
    })
}
