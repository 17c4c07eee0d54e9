//! What `proxy` and `serve` share: listeners on TCP addresses and Unix domain sockets, a cap on
//! connections, the header and idle timers of each connection, the drain on shutdown, and the
//! admin address (`/healthz`, `/readyz`, `/metrics`).

mod admin;
mod listener;
mod serve;
mod shutdown;
mod watch;

pub use self::admin::{Readiness, install_metrics, serve_admin};
pub use self::listener::{Address, Listener};
pub use self::serve::serve;
pub use self::shutdown::{Shutdown, ShutdownTrigger};
pub use self::watch::{InFlight, Tracked};
pub use crate::config::Connections;

/// An error of any kind, with a message that says what failed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
