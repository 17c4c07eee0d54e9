//! The Redis side of the store: the entry points of `lua/`, how a call of one is built
//! ([`Call`]), in which [`Dialect`] it is sent, and the decisions' replies.
//!
//! `lua/` holds one file per algorithm (each defining its `ALGORITHMS[id]`), the helpers they
//! share (`common.lua`), and one entry point per kind of call, each opening with its
//! KEYS/ARGV/reply contract ([`Entry`]): `decide.lua` (rate-limit decisions), `grant.lua` and
//! `refund.lua` (quota leases), `reset.lua`, `concurrency.lua` (permits).
//!
//! Two ways to run them:
//! - **Functions** (Redis 7+, the default): one library (`FUNCTION LOAD`) defines the helpers,
//!   the algorithms and every entry point once, as functions named after the library's version
//!   (a digest of its source), and each call is an `FCALL`. A server that answers that the
//!   function is not found (restarted without persistence, flushed, a new node, or holding
//!   another version of the library) gets the library loaded (`FUNCTION LOAD REPLACE`, on every
//!   primary of a cluster) and the call sent again; replicas receive it by replication, so a
//!   failover needs no reload.
//! - **Scripts** (Redis 6.2, or [`functions(false)`](crate::store::RedisStoreBuilder::functions)):
//!   each entry point composed into a script of its own with the helpers and the algorithms it
//!   may call (a decision's script holds only the algorithms of its policy: Redis runs a script's
//!   whole body, definitions included, on every call), sent as `EVALSHA` and loaded on
//!   `NOSCRIPT`. A server that does not know `FCALL` switches a store to scripts until its
//!   connection is replaced.
//!
//! A wrapper store that needs calls of its own (another entry point, other keys) adds its Lua
//! file and an [`Entry`], and builds [`Call`]s: the connection sends them in whichever dialect
//! the server speaks, loading the library or the script as needed.

mod call;
pub(super) mod decide;
mod entry;
mod library;

pub(in crate::store) use self::call::Call;
pub(super) use self::call::{Dialect, Recovery};
pub(super) use self::decide::state_key;
pub(in crate::store) use self::entry::Entry;
pub(super) use self::library::Library;
