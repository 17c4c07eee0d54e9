//! axum extractors for what the layers put into a request's extensions, which make a missing value
//! explicit: a handler takes `Option<Decision>` or `Option<ConcurrencyPermit>`, and the compiler
//! will not let it take one as if it were always there.
//!
//! Not every request that reaches a handler was decided: when the store failed and the layer fails
//! open, or when the request had no key and the layer skips such requests, it passes unchecked.
//! axum's `Extension<Decision>` would answer those requests with 500, turning a Redis outage into
//! an outage of the route.

use std::convert::Infallible;

use axum::extract::OptionalFromRequestParts;
use http::request::Parts;

#[cfg(feature = "concurrency")]
use crate::concurrency::ConcurrencyPermit;
use crate::decision::Decision;

/// Makes `Option<$value>` an axum extractor of the value a layer put into the request extensions.
macro_rules! optional_extension {
    ($(#[$doc:meta])* $value:ty) => {
        $(#[$doc])*
        #[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
        impl<S: Send + Sync> OptionalFromRequestParts<S> for $value {
            type Rejection = Infallible;

            async fn from_request_parts(
                parts: &mut Parts,
                _: &S,
            ) -> Result<Option<Self>, Infallible> {
                Ok(parts.extensions.get::<$value>().cloned())
            }
        }
    };
}

optional_extension!(
    /// `Option<Decision>`: the rate limit's decision on this request, if one was made (see
    /// [`Decision`]).
    Decision
);

#[cfg(feature = "concurrency")]
optional_extension!(
    /// `Option<ConcurrencyPermit>`: the slot this request holds, if it holds one.
    ConcurrencyPermit
);
