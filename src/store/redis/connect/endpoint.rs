//! [`Endpoint`]: what a store connects with, whatever its target (one server, a cluster, the
//! primary that sentinels name): how decisions connect, how the reset listener subscribes, and
//! how logs show the target. Each kind of target makes one (`standalone`, `cluster`, `sentinel`).

use super::connection::Connect;
use super::subscribe::Subscribe;

/// What a store connects with.
pub(in crate::store::redis) struct Endpoint {
    /// Makes the connection every decision shares.
    pub(in crate::store::redis) connect: Connect,
    /// Makes the reset listener's pub/sub connection.
    pub(in crate::store::redis) subscribe: Subscribe,
    /// The target, without passwords: `redacted_url`.
    pub(in crate::store::redis) shown: String,
}
