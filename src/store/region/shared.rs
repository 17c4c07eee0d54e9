//! [`Shared`]: what a region store and its mover share, and the mover's calls through it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::allotment::Region;
use super::demand::Demand;
use super::ledger::Ledger;
use super::partition::PartitionMode;
use crate::clock::Clock;
use crate::store::StoreError;

/// A region store's settings (see [`RegionStoreBuilder`]).
pub(crate) struct Settings {
    pub(crate) name: Box<str>,
    pub(crate) partition: PartitionMode,
    pub(crate) max_skew_us: u64,
    pub(crate) sync_every: Duration,
    pub(crate) move_timeout: Duration,
    pub(crate) partition_after: Duration,
}

/// What a region store and its mover share.
pub(crate) struct Shared {
    pub(crate) region: Region,
    pub(crate) ledger: Ledger,
    pub(crate) settings: Settings,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) demand: Demand,
    /// This instance's id: its moves' ids start with it, and it names the region's mover.
    pub(crate) instance: Box<str>,
    pub(crate) moves: AtomicU64,
    /// Since when (µs) every call to the ledger has failed; 0 while it answers.
    pub(crate) failing_since: AtomicU64,
    pub(crate) mover: AtomicBool,
}

impl Shared {
    /// Runs a call of the mover within `move_timeout`, counted in
    /// `ratelimit_region_calls_total`.
    pub(crate) async fn within<T>(
        &self,
        call: &'static str,
        future: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let answer = match tokio::time::timeout(self.settings.move_timeout, future).await {
            Ok(answer) => answer,
            Err(_) => Err(StoreError::timeout(self.settings.move_timeout)),
        };
        crate::telemetry::region_call(call, if answer.is_ok() { "ok" } else { "error" });
        answer
    }

    /// Notes whether the ledger answered (for `cut_off`).
    pub(crate) fn ledger_answered<T>(
        &self,
        answer: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let now = self.clock.now_micros();
        match &answer {
            Ok(_) => self.failing_since.store(0, Ordering::Relaxed),
            Err(error) => {
                let _ = self.failing_since.compare_exchange(
                    0,
                    now,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                tracing::debug!(%error, "the ledger of global policies did not answer");
            }
        }
        answer
    }

    /// Whether the ledger has failed every call for `partition_after` or longer.
    pub(crate) fn cut_off(&self, now: u64) -> bool {
        let since = self.failing_since.load(Ordering::Relaxed);
        since != 0
            && Duration::from_micros(now.saturating_sub(since)) >= self.settings.partition_after
    }

    /// A new move's id: this instance's id and a counter.
    pub(crate) fn move_id(&self) -> Box<str> {
        let n = self.moves.fetch_add(1, Ordering::Relaxed);
        format!("{}.{n}", self.instance).into()
    }
}
