//! A file loaded for `serve`: its `[serve]` table's settings and the built limits.

use tower_redis_ratelimit::config::Limits;

use super::admitted::admitted;
use super::client::Gateways;
use crate::config::StartOnlyField;
use crate::config::{Connections, FieldError, File, FileError, ServeConfig};
use crate::envoy::RateLimitService;
use crate::envoy::quota::QuotaService;
use crate::runtime::{AdminAccess, PathServices, StartOnly, tls};

/// A file loaded for `serve`: its settings and the built limits.
pub struct Loaded {
    /// The `[serve]` table.
    pub table: ServeConfig,
    /// `[serve.connections]` with its defaults.
    pub connections: Connections,
    /// Who may name the client, and in which header.
    pub(crate) gateways: Gateways,
    /// TLS on the TCP listener.
    pub(crate) tls: Option<tls::Certified>,
    /// The limits, built.
    pub limits: Limits,
    /// A service that admits, behind each path prefix's routes: built here, once per load.
    pub(crate) paths: PathServices,
    /// Envoy's rate limit service, when `[serve.envoy]` names its files: built again with each
    /// reload's limits, so it counts in the same stores.
    pub envoy: Option<RateLimitService>,
    /// Envoy's rate limit quota service, over the same files: a reload gives the running one
    /// its rules ([`QuotaService::reload_from`]), so its streams and shares go on.
    pub quota: Option<QuotaService>,
    /// Who may reset on the admin address.
    pub admin_access: AdminAccess,
}

/// Checks and builds `file` for `serve`; on a reload, keeping the stores of `previous` whose
/// settings did not change (their counts and connections).
pub fn load(file: &File, previous: Option<&Limits>) -> Result<Loaded, FileError> {
    let field = |error| file.field_error(error);
    let table = file.tables.serve.clone().ok_or_else(|| {
        field(FieldError::new(
            "serve",
            "no [serve] table: `serve` needs at least `listen` or `socket`",
        ))
    })?;
    if table.listen.is_none() && table.socket.is_none() {
        return Err(field(FieldError::new(
            "serve.listen",
            "`serve` needs `listen` (a TCP address), `socket` (a Unix socket's path) or both",
        )));
    }
    if table.tls.is_some() && table.listen.is_none() {
        return Err(field(FieldError::new(
            "serve.tls",
            "TLS is for the TCP listener: set `listen` too",
        )));
    }
    // A permit is held until the answer's body ends: here that is the answer to the gateway,
    // long before the request it asks about is served.
    if let Some(name) = file.limits.concurrency.keys().next() {
        return Err(field(FieldError::new(
            format!("concurrency.{name}"),
            "`serve` answers before the request is served, so it cannot hold a concurrency \
             slot for it: concurrency limits work in `proxy` only (remove the table to run \
             `serve`)",
        )));
    }
    let connections = table
        .connections
        .settings("serve.connections")
        .map_err(field)?;
    let admin_access =
        AdminAccess::new("serve", table.admin, table.admin_token.as_deref()).map_err(field)?;
    let gateways = Gateways::new(&table).map_err(field)?;
    let tls = match &table.tls {
        Some(config) => Some(
            tls::certified(&config.certificate, &config.private_key)
                .map_err(|err| field(FieldError::new("serve.tls", err)))?,
        ),
        None => None,
    };
    let limits = match previous {
        Some(previous) => file.limits.rebuild(previous),
        None => file.limits.build(),
    }
    .map_err(|err| file.limits_error(err))?;
    let envoy = match &table.envoy {
        Some(envoy) => Some(RateLimitService::load(
            &envoy.files,
            envoy.settings(),
            &limits,
        )?),
        None => None,
    };
    let quota = match &table.envoy {
        Some(envoy) => Some(QuotaService::load(&envoy.files, &limits)?),
        None => None,
    };
    Ok(Loaded {
        envoy,
        quota,
        admin_access,
        paths: PathServices::build(&limits, &file.route_keys(), &admitted(), false),
        table,
        connections,
        gateways,
        tls,
        limits,
    })
}

impl StartOnly for Loaded {
    fn start_only(&self) -> Vec<StartOnlyField> {
        self.table.start_only()
    }
}
