//! Reloading when envoyproxy/ratelimit's files change, as the reference reloads when its
//! runtime directory changes: the Envoy files' file or directory is looked at every
//! [`WATCH_INTERVAL`] (names, sizes and modification times of its YAML files), and a change
//! reloads the whole configuration as SIGHUP does. Polling rather than inotify: it sees files
//! replaced by a rename (a Kubernetes ConfigMap's symlink swap) and works on every system.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How often the Envoy files are looked at.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// What is compared between two looks: each YAML file's path, size and modification time.
type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// Calls `changed` whenever the files at the path `files` gives (read again each time: a
/// reload may name another) look different than at the previous look. Runs until dropped.
pub async fn on_change(files: impl Fn() -> Option<PathBuf>, changed: impl Fn()) {
    let mut seen = files().map(|path| fingerprint(&path));
    loop {
        tokio::time::sleep(WATCH_INTERVAL).await;
        let now = files().map(|path| fingerprint(&path));
        if now != seen {
            changed();
            // What the reload read; a reload that failed is not tried again until the files
            // change again (or SIGHUP).
            seen = files().map(|path| fingerprint(&path));
        }
    }
}

/// The Envoy files as they are now (a file that cannot be read has no entry).
fn fingerprint(path: &Path) -> Fingerprint {
    let files: Vec<PathBuf> = match std::fs::read_dir(path) {
        Ok(entries) => entries
            .filter_map(|entry| Some(entry.ok()?.path()))
            .filter(|file| {
                matches!(
                    file.extension().and_then(|ext| ext.to_str()),
                    Some("yaml" | "yml")
                )
            })
            .collect(),
        Err(_) => vec![path.to_owned()],
    };
    let mut print: Fingerprint = files
        .into_iter()
        .filter_map(|file| {
            // Follows links: a ConfigMap's files are links to the current version.
            let meta = std::fs::metadata(&file).ok()?;
            Some((file, meta.len(), meta.modified().ok()))
        })
        .collect();
    print.sort();
    print
}
