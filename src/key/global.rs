//! One key for every request.

use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// Counts every request against the same key: a limit for the whole service (or, with a
/// distinct name per route, for a whole route), shared by every replica that shares the store.
#[derive(Clone, Debug)]
pub struct GlobalKey(Key);

impl GlobalKey {
    /// A global key named `name`.
    pub fn new(name: impl Into<Key>) -> Self {
        GlobalKey(name.into())
    }
}

impl KeyExtractor for GlobalKey {
    fn extract(&self, _: &Parts) -> Result<Key, KeyError> {
        Ok(self.0.clone())
    }
}
