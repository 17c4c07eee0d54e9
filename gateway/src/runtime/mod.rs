//! What `proxy` and `serve` share: listeners on TCP addresses and Unix domain sockets, a cap on
//! connections, the header and idle timers of each connection, the drain on shutdown, and the
//! admin address (`/healthz`, `/readyz`, `/metrics`, `POST /reset`).

mod access_log;
mod admin;
mod admin_access;
mod admin_reset;
mod authority;
mod boxed;
mod connections;
mod in_flight;
mod listener;
pub mod logs;
mod normalised;
mod path_services;
mod problem;
mod prometheus;
mod reload;
mod request_id;
mod reset;
mod shutdown;
mod text;
pub mod tls;
mod workers;

pub use self::access_log::{AccessLog, Entry, EnvoyQuestion, waited};
pub use self::admin::{Admin, Readiness, count_request, status_class};
pub use self::admin_access::AdminAccess;
pub use self::boxed::{Boxed, behind};
pub use self::connections::serve_connections;
pub use self::in_flight::{InFlight, Tracked};
pub use self::listener::{Address, Listener};
pub use self::normalised::normalised;
pub use self::path_services::{PathServices, Stack};
pub use self::problem::problem;
pub use self::reload::{Hangups, Reloadable, StartOnly};
pub use self::request_id::{X_REQUEST_ID, request_id};
pub use self::reset::{
    RESET_TIMEOUT, ResetError, ResetTarget, Resetter, reset_route, reset_within,
};
pub use self::shutdown::{Shutdown, ShutdownTrigger};
pub use self::workers::{Workers, current_worker};
pub use crate::config::Connections;

/// An error of any kind, with a message that says what failed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
