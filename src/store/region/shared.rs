//! [`Shared`]: what a region store and its mover share, and the mover's calls through it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
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
    /// What this instance knows of the ledger's declaration: [`UNKNOWN`], [`DECLARED`] or
    /// [`UNDECLARED`].
    pub(crate) declared: AtomicU8,
}

/// Not known yet whether the ledger is declared (before its first answer).
pub(crate) const UNKNOWN: u8 = 0;
/// The ledger is declared: it grants.
pub(crate) const DECLARED: u8 = 1;
/// The ledger is not declared: it grants nothing, and no quota of a global policy can come.
pub(crate) const UNDECLARED: u8 = 2;

/// What a region store says while its ledger is not declared (its requests' errors, `/readyz`,
/// the log).
pub(crate) const NOT_DECLARED: &str = "ledger not declared: no quota of a global policy can be \
    granted until an operator declares it (ratelimit-gateway ledger declare FILE)";

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

    /// Notes what the ledger said of its declaration; logs each change (a warning when it is
    /// not declared: every global request is refused until it is).
    pub(crate) fn note_declared(&self, declared: bool) {
        let state = if declared { DECLARED } else { UNDECLARED };
        let before = self.declared.swap(state, Ordering::Relaxed);
        if before == state {
            return;
        }
        let region = &*self.settings.name;
        if declared {
            if before == UNDECLARED {
                tracing::info!(region, "ledger declared: global policies are granted quota");
            }
        } else {
            tracing::warn!(region, "{NOT_DECLARED}");
        }
    }

    /// Whether the ledger is known not to be declared.
    pub(crate) fn undeclared(&self) -> bool {
        self.declared.load(Ordering::Relaxed) == UNDECLARED
    }

    /// Notes what a take's `answer` says of the declaration: an answer says it is declared;
    /// the error of a ledger without a birth that it is not, or, where it was known declared,
    /// that the next tick must ask (a take sent before the declaration may answer after it);
    /// any other error says nothing.
    pub(crate) fn note_answer<T>(&self, answer: &Result<T, StoreError>) {
        match answer {
            Ok(_) => self.note_declared(true),
            Err(error) if error.to_string().contains("ledger not declared") => {
                if self
                    .declared
                    .compare_exchange(DECLARED, UNKNOWN, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    self.note_declared(false);
                }
            }
            Err(_) => {}
        }
    }

    /// A new move's id: this instance's id and a counter.
    pub(crate) fn move_id(&self) -> Box<str> {
        let n = self.moves.fetch_add(1, Ordering::Relaxed);
        format!("{}.{n}", self.instance).into()
    }
}
