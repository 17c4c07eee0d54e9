//! What a command built from its file, shared by its requests and replaced whole when SIGHUP
//! reloads the file; and `/readyz`'s question about the stores it holds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tower_redis_ratelimit::config::Limits;

use super::Readiness;
use crate::config::{File, FileError, StartOnlyField, changed};

/// A loaded configuration's fields that are read at start only, which a reload cannot apply.
pub trait StartOnly {
    /// The fields, named and written as a message shows them.
    fn start_only(&self) -> Vec<StartOnlyField>;
}

/// SIGHUP, heard from the moment this is made: made before a command says it listens, so
/// that a signal sent as soon as it does is a reload, never the default action (the end of the
/// process).
pub struct Hangups(#[cfg(unix)] Option<tokio::signal::unix::Signal>);

impl Hangups {
    /// Starts hearing SIGHUP (within a Tokio runtime).
    pub fn hear() -> Hangups {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Hangups(signal(SignalKind::hangup()).ok())
        }
        #[cfg(not(unix))]
        Hangups()
    }
}

/// What is in force, replaced whole on a reload; requests take their own `Arc` of it.
pub struct Reloadable<T> {
    current: RwLock<Arc<T>>,
    /// The start-only fields as the process started with them: what runs, whatever a later
    /// file says.
    started: Vec<StartOnlyField>,
}

impl<T: StartOnly + Send + Sync + 'static> Reloadable<T> {
    /// `first` in force.
    pub fn new(first: T) -> Arc<Self> {
        Arc::new(Self {
            started: first.start_only(),
            current: RwLock::new(Arc::new(first)),
        })
    }

    /// What is in force now.
    pub fn current(&self) -> Arc<T> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn replace(&self, next: T) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
    }

    /// Reads the file at `path` again on every SIGHUP `hangups` hears and builds it with
    /// `build`, which is given what is in force (to keep its stores: their counts, connections
    /// and permits); a file that fails to load leaves what runs, and says why in the log.
    pub async fn reload_on_hangup<B>(self: Arc<Self>, hangups: Hangups, path: PathBuf, build: B)
    where
        B: Fn(&File, &T) -> Result<T, FileError> + Send + 'static,
    {
        #[cfg(unix)]
        if let Some(mut hangups) = hangups.0 {
            while hangups.recv().await.is_some() {
                self.reload(&path, &build);
            }
        }
        #[cfg(not(unix))]
        let _ = (hangups, path, build);
    }

    /// Reads the file at `path` again and builds it with `build`, given what is in force; a
    /// file that fails to load leaves what runs, and says why in the log; one that changes a
    /// field read at start only is applied without it, and the log names the field.
    pub fn reload<B>(&self, path: &Path, build: &B)
    where
        B: Fn(&File, &T) -> Result<T, FileError>,
    {
        let previous = self.current();
        match File::read(path).and_then(|file| build(&file, &previous)) {
            Ok(next) => {
                let not_applied = changed(&self.started, &next.start_only());
                self.replace(next);
                if not_applied.is_empty() {
                    tracing::info!(path = %path.display(), "configuration reloaded");
                } else {
                    tracing::warn!(
                        path = %path.display(),
                        "configuration reloaded; not applied until restart: {}",
                        not_applied.join(", ")
                    );
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "configuration not reloaded, the old one stays");
            }
        }
    }

    /// `/readyz`: the configuration is loaded (it is, once running), and every store of the
    /// limits in force (`limits` finds them) answers.
    pub fn readiness(self: &Arc<Self>, limits: fn(&T) -> &Limits) -> Readiness {
        let shared = Arc::clone(self);
        Arc::new(move || {
            let current = shared.current();
            Box::pin(async move {
                let failed: Vec<String> = limits(&current)
                    .ping_stores()
                    .await
                    .into_iter()
                    .filter_map(|(name, answer)| {
                        answer.err().map(|err| format!("store {name}: {err}"))
                    })
                    .collect();
                if failed.is_empty() {
                    Ok(())
                } else {
                    Err(failed.join("; "))
                }
            })
        })
    }
}
