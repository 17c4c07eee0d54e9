//! [`StoreError`]: why a store could not answer, and its [`StoreErrorKind`].

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a store could not answer. The layer turns it into its failure mode (fail open by default).
///
/// Like [`std::io::Error`], it has a [`kind`](Self::kind) to match on and, where the store's
/// client gave one, the underlying error as its [`source`](StdError::source). Cheap to clone:
/// one failed reconnect answers many waiting requests.
#[derive(Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    detail: Detail,
}

/// What kind of failure a [`StoreError`] is: whether the call may have reached the store decides
/// what a caller can undo, and metrics count errors by it (`kind` label of
/// `ratelimit_store_errors_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The store did not answer within the layer's deadline. The call may have been applied.
    Timeout,
    /// No connection could be made, or the store is waiting out its backoff after failing to
    /// make one: nothing was sent, so nothing was applied.
    NeverSent,
    /// The connection failed during the call: the call may have been applied.
    ConnectionLost,
    /// The store answered with an error (out of memory, a read-only replica, no permission, a
    /// script that failed, a store full): nothing was applied.
    ErrorReply,
    /// The store answered something this crate does not understand (a script of another
    /// version?).
    BadReply,
}

impl StoreErrorKind {
    /// The kind as a metrics label: `timeout`, `never_sent`, `connection_lost`, `error_reply`,
    /// `bad_reply`.
    pub const fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::Timeout => "timeout",
            StoreErrorKind::NeverSent => "never_sent",
            StoreErrorKind::ConnectionLost => "connection_lost",
            StoreErrorKind::ErrorReply => "error_reply",
            StoreErrorKind::BadReply => "bad_reply",
        }
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone)]
enum Detail {
    /// How long the layer waited.
    Waited(Duration),
    /// What the store's client said.
    Source(Arc<dyn StdError + Send + Sync>),
    /// What was wrong with a reply.
    Message(Arc<str>),
}

impl StoreError {
    /// A store call of `kind` that failed because of `source` (the store client's error).
    pub fn new(kind: StoreErrorKind, source: impl StdError + Send + Sync + 'static) -> Self {
        Self {
            kind,
            detail: Detail::Source(Arc::new(source)),
        }
    }

    /// A store that did not answer within `waited` ([`StoreErrorKind::Timeout`]).
    pub fn timeout(waited: Duration) -> Self {
        Self {
            kind: StoreErrorKind::Timeout,
            detail: Detail::Waited(waited),
        }
    }

    /// A reply this crate does not understand ([`StoreErrorKind::BadReply`]), and what was wrong
    /// with it.
    pub fn bad_reply(what: impl Into<Arc<str>>) -> Self {
        Self {
            kind: StoreErrorKind::BadReply,
            detail: Detail::Message(what.into()),
        }
    }

    /// A call the store answered with an error ([`StoreErrorKind::ErrorReply`]), and why (a store that cannot do
    /// what was asked of it).
    pub fn error_reply(why: impl Into<Arc<str>>) -> Self {
        Self {
            kind: StoreErrorKind::ErrorReply,
            detail: Detail::Message(why.into()),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the call surely never reached the store ([`StoreErrorKind::NeverSent`]): there is
    /// nothing to undo. A timeout or a connection lost mid-call may have delivered it.
    pub fn never_sent(&self) -> bool {
        self.kind == StoreErrorKind::NeverSent
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            StoreErrorKind::Timeout => "the rate-limit store did not answer in time",
            StoreErrorKind::NeverSent => "the rate-limit store is unreachable",
            StoreErrorKind::ConnectionLost => "the connection to the rate-limit store was lost",
            StoreErrorKind::ErrorReply => "the rate-limit store answered with an error",
            StoreErrorKind::BadReply => "the rate-limit store sent an unexpected reply",
        };
        match &self.detail {
            Detail::Waited(waited) => write!(f, "{what}: no answer within {waited:?}"),
            Detail::Source(source) => write!(f, "{what}: {source}"),
            Detail::Message(message) => write!(f, "{what}: {message}"),
        }
    }
}

impl fmt::Debug for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The message, as `main` prints an error returned with `?`, and the kind to match on.
        write!(f, "{self} ({:?})", self.kind)
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.detail {
            Detail::Source(source) => Some(&**source as &(dyn StdError + 'static)),
            Detail::Waited(_) | Detail::Message(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_its_kind_and_keeps_its_source() {
        let error = StoreError::new(
            StoreErrorKind::NeverSent,
            std::io::Error::other("connection refused"),
        );
        assert!(error.never_sent());
        assert_eq!(error.kind().as_str(), "never_sent");
        assert_eq!(
            error.to_string(),
            "the rate-limit store is unreachable: connection refused"
        );
        assert_eq!(error.source().unwrap().to_string(), "connection refused");
        let timeout = StoreError::timeout(Duration::from_millis(100));
        assert!(!timeout.never_sent());
        assert_eq!(format!("{timeout:?}"), format!("{timeout} (Timeout)"));
        assert!(timeout.source().is_none());
    }
}
