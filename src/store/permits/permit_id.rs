//! [`PermitId`]: the unique name of one held slot.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

/// 64 random bits per process: two servers sharing a Redis never pick the same id, even when
/// their counters are equal (both restarted at the same time). `RandomState` is seeded by the
/// operating system's randomness; the process id and the time are mixed in for good measure.
static PROCESS: LazyLock<u64> = LazyLock::new(|| {
    std::collections::hash_map::RandomState::new().hash_one((
        std::process::id(),
        SystemTime::now(),
        Instant::now(),
    ))
});

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The identity of one permit: a random per-process prefix and a per-process counter, so ids are
/// unique across every server that shares a store.
///
/// ```
/// use tower_redis_ratelimit::store::permits::PermitId;
///
/// let (a, b) = (PermitId::next(), PermitId::next());
/// assert_ne!(a, b);
/// assert_eq!(a.to_string().len(), 16 + 1 + 1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId {
    process: u64,
    sequence: u64,
}

impl PermitId {
    /// A fresh id, never returned before by this process.
    pub fn next() -> Self {
        Self {
            process: *PROCESS,
            sequence: SEQUENCE.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// `<process prefix, 16 hex digits>-<counter in hex>`: the member name in the Redis sorted set.
impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}-{:x}", self.process, self.sequence)
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_share_the_process_prefix_and_never_repeat() {
        let ids: Vec<PermitId> = (0..1000).map(|_| PermitId::next()).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        let prefix = &ids[0].to_string()[..17];
        assert!(ids.iter().all(|id| id.to_string().starts_with(prefix)));
    }
}
