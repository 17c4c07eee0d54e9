//! Lifting a ban: what an operator names to reset (a route's key, or an Envoy descriptor), read
//! from the admin address's JSON or the command line, and the reset of a route's key in the
//! limits in force. The library's `Store::reset` does the work: in a Redis store it deletes
//! the key's state and tells every instance sharing the store, over pub/sub, to forget its
//! remembered denials and quota leases for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tower_redis_ratelimit::config::Limits;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::StoreError;

/// How long a reset may take: a store call, not bounded by any route's deadline, that an
/// operator waits for.
pub const RESET_TIMEOUT: Duration = Duration::from_secs(10);

/// What to reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResetTarget {
    /// A key under every policy (and plan) of a route of the file.
    Route {
        /// The route's name.
        route: String,
        /// The key, as the route's key extractor makes it (a header's value, a client's
        /// address).
        key: String,
    },
    /// The counter an Envoy descriptor of a domain counts in.
    Descriptor {
        /// The domain.
        domain: String,
        /// The descriptor's entries, in order: `(key, value)`.
        entries: Vec<(String, String)>,
    },
}

/// Why a reset was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResetError {
    /// The request does not say what to reset.
    #[error("{0}")]
    Invalid(String),
    /// What it names is not in the limits in force.
    #[error("{0}")]
    Unknown(String),
    /// The store failed (or did not answer in time): the key may or may not be reset; ask
    /// again.
    #[error("the store failed: {0}; the reset may not have been made, ask again")]
    Store(#[from] StoreError),
}

/// Makes resets in the limits in force: given by `proxy` and `serve` to the admin address.
pub type Resetter = Arc<
    dyn Fn(ResetTarget) -> Pin<Box<dyn Future<Output = Result<String, ResetError>> + Send>>
        + Send
        + Sync,
>;

/// The admin address's `POST /reset` body: `{"route": ..., "key": ...}` or
/// `{"domain": ..., "descriptor": [{"key": ..., "value": ...}, ...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    route: Option<String>,
    key: Option<String>,
    domain: Option<String>,
    descriptor: Option<Vec<Entry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    key: String,
    value: String,
}

impl ResetTarget {
    /// The target of a `POST /reset` body.
    pub fn from_json(body: &[u8]) -> Result<ResetTarget, ResetError> {
        let body: Body = serde_json::from_slice(body).map_err(|err| {
            ResetError::Invalid(format!(
                "{err}: send {{\"route\": \"...\", \"key\": \"...\"}} or {{\"domain\": \"...\", \
                 \"descriptor\": [{{\"key\": \"...\", \"value\": \"...\"}}]}}"
            ))
        })?;
        match body {
            Body {
                route: Some(route),
                key: Some(key),
                domain: None,
                descriptor: None,
            } => Ok(ResetTarget::Route { route, key }),
            Body {
                route: None,
                key: None,
                domain: Some(domain),
                descriptor: Some(entries),
            } => Ok(ResetTarget::Descriptor {
                domain,
                entries: entries
                    .into_iter()
                    .map(|entry| (entry.key, entry.value))
                    .collect(),
            }),
            _ => Err(ResetError::Invalid(
                "name either `route` and `key`, or `domain` and `descriptor`".to_owned(),
            )),
        }
    }
}

impl<T: super::StartOnly + Send + Sync + 'static> super::Reloadable<T> {
    /// `POST /reset`'s work in what is in force when it is asked: `reset` is given that and the
    /// target.
    pub fn resetter<F, R>(self: &Arc<Self>, reset: F) -> Resetter
    where
        F: Fn(Arc<T>, ResetTarget) -> R + Send + Sync + 'static,
        R: Future<Output = Result<String, ResetError>> + Send + 'static,
    {
        let shared = Arc::clone(self);
        Arc::new(move |target| Box::pin(reset(shared.current(), target)))
    }
}

/// Resets `key` under every policy of `route` in `limits`, within [`RESET_TIMEOUT`]; says what
/// it did.
pub async fn reset_route(limits: &Limits, route: &str, key: &str) -> Result<String, ResetError> {
    let Some(layer) = limits.layer(route) else {
        let known: Vec<&str> = limits.layers().map(|(name, _)| name).collect();
        return Err(ResetError::Unknown(format!(
            "no route {route:?}: the file's routes are {known:?}"
        )));
    };
    reset_within(layer.reset(&Key::from(key))).await?;
    Ok(format!("reset key {key:?} of route {route:?}"))
}

/// `reset`, failed with a timeout after [`RESET_TIMEOUT`].
pub async fn reset_within(
    reset: impl Future<Output = Result<(), StoreError>>,
) -> Result<(), ResetError> {
    match tokio::time::timeout(RESET_TIMEOUT, reset).await {
        Ok(done) => Ok(done?),
        Err(_) => Err(StoreError::timeout(RESET_TIMEOUT).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_names_a_routes_key_or_a_descriptor_and_nothing_else() {
        assert_eq!(
            ResetTarget::from_json(br#"{"route": "api", "key": "k-1"}"#).unwrap(),
            ResetTarget::Route {
                route: "api".to_owned(),
                key: "k-1".to_owned()
            }
        );
        let descriptor = br#"{"domain": "rl", "descriptor": [{"key": "user", "value": "ann"}]}"#;
        assert_eq!(
            ResetTarget::from_json(descriptor).unwrap(),
            ResetTarget::Descriptor {
                domain: "rl".to_owned(),
                entries: vec![("user".to_owned(), "ann".to_owned())]
            }
        );
        for wrong in [
            &br#"{"route": "api"}"#[..],
            br#"{"route": "api", "key": "k", "domain": "rl"}"#,
            br#"{"route": "api", "key": "k", "other": 1}"#,
            br#"{}"#,
            b"route=api",
        ] {
            assert!(
                matches!(ResetTarget::from_json(wrong), Err(ResetError::Invalid(_))),
                "{}",
                String::from_utf8_lossy(wrong)
            );
        }
    }
}
