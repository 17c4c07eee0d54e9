//! A directory of one's own under the system's temporary directory.

use std::path::{Path, PathBuf};

/// A fresh directory under [`std::env::temp_dir`], removed with everything in it when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<temp>/trr-<what>-<pid>-<random>`: the process ID and a random number keep
    /// parallel tests and concurrent test runs apart.
    pub fn new(what: &str) -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "trr-{what}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Gone already is fine; anything else left behind is in the system's temporary directory.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
