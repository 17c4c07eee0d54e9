//! Which route a request path belongs to: path prefixes, the longest matching one wins.

use super::SettingError;
use crate::error::ConfigError;

/// Path prefixes and the names of their routes.
#[derive(Clone, Debug)]
pub(super) struct Paths {
    /// What the routes are, in errors: `route`, `concurrency limit`.
    noun: &'static str,
    /// Longest prefix first, once [`Paths::sorted`].
    prefixes: Vec<(String, String)>,
}

impl Paths {
    /// No paths yet, for routes called `noun`.
    pub(super) fn new(noun: &'static str) -> Self {
        Self {
            noun,
            prefixes: Vec::new(),
        }
    }

    /// Adds `route`'s prefixes, named `field[index]` in errors: each must start with `/` and
    /// belong to no other route of this table.
    pub(super) fn add(
        &mut self,
        field: &str,
        route: &str,
        prefixes: &[String],
    ) -> Result<(), ConfigError> {
        for (index, path) in prefixes.iter().enumerate() {
            let invalid = |error: SettingError| super::invalid(format!("{field}[{index}]"), error);
            if !path.starts_with('/') {
                return Err(invalid(SettingError::NotAPath { path: path.clone() }));
            }
            if let Some((_, other)) = self.prefixes.iter().find(|(taken, _)| taken == path) {
                return Err(invalid(SettingError::PathTaken {
                    path: path.clone(),
                    table: self.noun,
                    owner: other.clone(),
                }));
            }
            self.prefixes.push((path.clone(), route.to_owned()));
        }
        Ok(())
    }

    /// Ready for lookups: the longest prefixes first.
    pub(super) fn sorted(mut self) -> Self {
        self.prefixes
            .sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then(a.cmp(b)));
        self
    }

    /// The route of the longest prefix `path` starts with.
    pub(super) fn route_for(&self, path: &str) -> Option<&str> {
        self.prefixes
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()))
            .map(|(_, route)| route.as_str())
    }
}
