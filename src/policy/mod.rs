//! Quotas, rules and policies: *what* is limited, independent of where the state lives and of
//! HTTP.
//!
//! - A [`Quota`](crate::Quota) is a number of requests per period, with an optional burst.
//! - A [`Rule`] names a quota and picks the [`Algorithm`] that enforces it. The name identifies the
//!   counter: two layers with rules of the same name and algorithm share their state for a key, as
//!   long as their quotas count it alike (the same period; for the bucket algorithms the same
//!   rate; for the sliding window the same sub-intervals; for the token bucket the same burst).
//!   Changing those under the same name starts fresh state; changing a window's limit or GCRA's
//!   burst keeps it.
//! - A [`Policy`] is one or more rules checked together, all or nothing.

mod global;
mod rule;
mod set;
mod state_code;

pub use self::rule::Rule;
#[cfg(feature = "concurrency")]
pub(crate) use self::rule::validate_name;
pub use self::set::{MAX_RULES, Policy};
pub use crate::algorithm::Algorithm;
pub use crate::quota::{MAX_DELAY, MAX_PERIOD, MIN_PERIOD};
