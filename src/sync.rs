//! [`lock`]: a mutex lock that outlives a panic elsewhere.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, whether or not a thread panicked while holding it.
///
/// Every critical section of this crate completes its update before unlocking (table operations
/// and arithmetic run inside, never user code), so a poisoned lock still guards a consistent
/// value; and a limiter that stopped serving because one request panicked would turn one failure
/// into an outage.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
