//! [`Waited`]: how long rate limits made an admitted request wait before it was served.

use std::time::Duration;

/// In an admitted request's extensions when a rate limit made it wait before it was served (a
/// rule with a [`max_delay`](crate::Rule::with_max_delay) queued it): the waits of every rate
/// limit it passed, summed. Absent when none waited. The [`Decision`](crate::Decision) in the
/// extensions is the innermost layer's; this counts them all, e.g. for an access log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waited(Duration);

impl Waited {
    /// The total wait.
    pub fn duration(&self) -> Duration {
        self.0
    }

    /// Adds a layer's `delay` to what `extensions` says was waited.
    pub(crate) fn add(extensions: &mut http::Extensions, delay: Duration) {
        let before = extensions
            .get::<Waited>()
            .map_or(Duration::ZERO, Waited::duration);
        extensions.insert(Waited(before + delay));
    }
}
