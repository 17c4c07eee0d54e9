//! What the Redis store answers locally, in process, beside the answers Redis gives: remembered
//! denials ([`Denials`], until their wait ends), quota leases ([`Leases`]: slices of a hot key's
//! quota spent here), batches of concurrent decisions of one policy ([`Batcher`]: one call for
//! many requests), and a fallback store while Redis fails ([`Degraded`]).
//!
//! Each is a part of the store that takes the store's state (`Inner`) and answers from its own
//! table, asking Redis through the store's connection when it must; `reset` makes every instance
//! forget what they remember of a key.

mod answer;
pub(super) mod batch;
mod denials;
pub(super) mod fallback;
pub(super) mod leases;

pub(super) use self::answer::Answer;
pub(super) use self::batch::Batcher;
pub(super) use self::denials::Denials;
pub(super) use self::fallback::Degraded;
pub use self::fallback::Fallback;
pub(super) use self::leases::Leases;
pub use self::leases::QuotaLeases;
