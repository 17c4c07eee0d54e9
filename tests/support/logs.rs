//! What the crate logs, captured as text so a test can assert on it.

use std::io;
use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;

/// Captured log output, shared with the subscriber that writes it.
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<Mutex<Vec<u8>>>);

impl io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures everything logged on this thread, at every level, while the guard lives: for
    /// tests whose logging happens on their own thread (a current-thread runtime).
    pub(crate) fn capture() -> (Self, DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Captures what the crate logs at debug level and above, on every thread, for the rest of the
    /// process: for logging from tasks on other threads. It installs the global subscriber, so a
    /// test binary can call it once.
    pub(crate) fn capture_globally() -> Self {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("tower_redis_ratelimit=debug")
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        logs
    }

    /// Everything captured so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The captured lines that contain `message`.
    pub(crate) fn lines_with(&self, message: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains(message))
            .map(str::to_owned)
            .collect()
    }
}
