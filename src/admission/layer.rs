//! [`AdmissionLayer`]: the one tower layer every middleware of this crate is.

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::admit::Admit;
use super::core::Core;
use super::service::Admission;

/// A tower [`Layer`] that puts a middleware of this crate in front of a service: a rate limit, a
/// concurrency limit or a load shedder, depending on `A`. Each middleware names it by an alias
/// ([`RateLimitLayer`](crate::RateLimitLayer), ...) and builds it with its own builder.
///
/// Layers are cheap to clone and every service made from one shares the same limit (the state
/// lives in the store or the layer, not in the service), so they work behind axum's cloning
/// router.
pub struct AdmissionLayer<A: Admit> {
    pub(crate) core: Arc<Core<A>>,
}

impl<A: Admit> AdmissionLayer<A> {
    pub(crate) fn new(core: Core<A>) -> Self {
        Self {
            core: Arc::new(core),
        }
    }
}

impl<S, A: Admit> Layer<S> for AdmissionLayer<A> {
    type Service = Admission<S, A>;

    fn layer(&self, inner: S) -> Admission<S, A> {
        Admission::new(inner, self.core.clone())
    }
}

impl<A: Admit> Clone for AdmissionLayer<A> {
    fn clone(&self) -> Self {
        Self {
            core: self.core.clone(),
        }
    }
}

impl<A: Admit + fmt::Debug> fmt::Debug for AdmissionLayer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionLayer")
            .field("core", &self.core)
            .finish()
    }
}
