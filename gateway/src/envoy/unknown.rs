//! A domain the files do not have: answered OK (as the reference does), and said in a warning,
//! since it usually means a typo in Envoy's `domain` or a file that did not load; said at most
//! once a minute per domain, so that a busy Envoy does not flood the log.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often one unknown domain is said.
const EVERY: Duration = Duration::from_secs(60);

/// The most domains remembered; past it, the memory starts again (a domain is then said again
/// early, never more than once per call).
const REMEMBERED: usize = 1024;

/// When each unknown domain was last said.
#[derive(Default)]
pub(super) struct UnknownDomains {
    said: Mutex<HashMap<String, Instant>>,
}

impl UnknownDomains {
    /// Warns of `domain`, unless it was said less than a minute ago.
    pub(super) fn note(&self, domain: &str, known: usize) {
        let now = Instant::now();
        let mut said = self
            .said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if said
            .get(domain)
            .is_some_and(|last| now.duration_since(*last) < EVERY)
        {
            return;
        }
        if said.len() >= REMEMBERED {
            said.clear();
        }
        said.insert(domain.to_owned(), now);
        drop(said);
        tracing::warn!(
            domain,
            known_domains = known,
            "a request names a domain the Envoy files do not have: answered OK, limiting \
             nothing (said once a minute per domain)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::UnknownDomains;

    #[test]
    fn a_domain_is_remembered_once_said() {
        let unknown = UnknownDomains::default();
        unknown.note("edge", 1);
        unknown.note("edge", 1);
        let said = unknown.said.lock().unwrap();
        assert_eq!(said.len(), 1);
    }
}
