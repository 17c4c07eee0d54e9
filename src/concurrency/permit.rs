//! [`ConcurrencyPermit`]: a held slot, given back when the last clone is dropped.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::store::permits::{PermitId, PermitStore, Slot};

/// Attempts to give a slot back before leaving it to its TTL.
const RELEASE_ATTEMPTS: u32 = 3;
/// How long one attempt may take.
const RELEASE_DEADLINE: Duration = Duration::from_secs(1);

/// One held slot of a concurrency limit. The slot is given back when the last clone is dropped.
///
/// [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer) puts one into the request extensions
/// of every admitted request, and keeps others in the response future and the response body: the
/// slot is held until the body is finished or dropped. To hold it longer, move a clone out of the
/// request, e.g. into the task that serves an upgraded WebSocket. An axum handler takes it as
/// `Option<ConcurrencyPermit>` (feature `axum`): it is `None` for a request that passed without a
/// slot because the store failed and the layer fails open.
///
/// ```
/// use axum::extract::WebSocketUpgrade;
/// use axum::extract::ws::{Message, WebSocket};
/// use axum::response::Response;
/// use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
///
/// async fn socket(permit: Option<ConcurrencyPermit>, upgrade: WebSocketUpgrade) -> Response {
///     upgrade.on_upgrade(move |socket| async move {
///         // The slot stays taken for as long as the connection lives.
///         let _permit = permit;
///         echo(socket).await;
///     })
/// }
///
/// async fn echo(mut socket: WebSocket) {
///     while let Some(Ok(message)) = socket.recv().await {
///         if socket.send(message).await.is_err() {
///             break;
///         }
///     }
/// }
/// ```
///
/// Giving a slot back is asynchronous: on a Tokio runtime it is spawned, retried a few times if
/// the store fails, and otherwise left to the TTL, which the heartbeat stops renewing at once.
/// Dropping a permit never blocks and never panics, also while a panic unwinds.
#[derive(Clone)]
pub struct ConcurrencyPermit {
    held: Arc<Held>,
}

struct Held {
    store: Arc<dyn PermitStore>,
    slot: Slot,
    id: PermitId,
}

impl ConcurrencyPermit {
    pub(crate) fn new(store: Arc<dyn PermitStore>, slot: Slot, id: PermitId) -> Self {
        Self {
            held: Arc::new(Held { store, slot, id }),
        }
    }

    /// The permit's id in the store.
    pub fn id(&self) -> PermitId {
        self.held.id
    }

    /// The slot it holds.
    pub fn slot(&self) -> &Slot {
        &self.held.slot
    }
}

impl fmt::Debug for ConcurrencyPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyPermit")
            .field("slot", &self.held.slot)
            .field("id", &self.held.id)
            .finish()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        release(&self.store, &self.slot, self.id);
    }
}

/// Gives a slot back: at once for a synchronous store, else on a spawned task, retried with
/// backoff. Without a runtime (or when every attempt fails) the TTL ends it: the store stopped
/// renewing the permit when `release` was called.
pub(crate) fn release(store: &Arc<dyn PermitStore>, slot: &Slot, id: PermitId) {
    let mut first = store.release(slot, id);
    if let Some(result) = first.take_ready() {
        if let Err(err) = result {
            tracing::debug!(error = %err, %id, "could not release a permit; its TTL will end it");
        }
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (store, slot) = (store.clone(), slot.clone());
    drop(runtime.spawn(async move {
        let mut attempt = tokio::time::timeout(RELEASE_DEADLINE, first).await;
        for retry in 1..RELEASE_ATTEMPTS {
            if matches!(attempt, Ok(Ok(_))) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100) * 2u32.pow(retry - 1)).await;
            attempt = tokio::time::timeout(RELEASE_DEADLINE, store.release(&slot, id)).await;
        }
        if !matches!(attempt, Ok(Ok(_))) {
            tracing::debug!(%id, ?slot, "could not release a permit; its TTL will end it");
        }
    }));
}
