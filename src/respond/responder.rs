//! [`Responder`]: how a layer answers a refused request, with the user's `on_rejection` hook or
//! the middleware's default response, then its headers, in gRPC's form for a gRPC call.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Response};

use super::grpc;
use super::headers::Stamp;

/// A user's `on_rejection` hook, its body turned into bytes.
type RejectFn<R> = dyn Fn(&R) -> Response<Bytes> + Send + Sync;

/// Answers a rejection of type `R`, before the layer adds its headers.
pub(crate) struct Responder<R> {
    custom: Option<Arc<RejectFn<R>>>,
    default: fn(&R) -> Response<Bytes>,
}

impl<R> Responder<R> {
    /// The middleware's `default` response, unless `custom` is given.
    pub(crate) fn new(default: fn(&R) -> Response<Bytes>, custom: Option<Hook<R>>) -> Self {
        Self {
            custom: custom.map(|hook| hook.0),
            default,
        }
    }

    /// The response to `rejection` of a request with `request` headers: written with `stamp`'s
    /// headers, and in gRPC's form for a gRPC call (see [`grpc`]). The hook's response is
    /// stamped too, so a client is told the same headers whoever wrote the body.
    pub(crate) fn refuse(
        &self,
        rejection: &R,
        stamp: Option<Stamp>,
        request: &HeaderMap,
    ) -> Response<Bytes> {
        let mut response = match &self.custom {
            Some(respond) => respond(rejection),
            None => (self.default)(rejection),
        };
        if let Some(stamp) = stamp {
            stamp.apply(response.headers_mut());
        }
        if grpc::is_grpc(request) {
            response = grpc::refusal(response);
        }
        response
    }
}

/// A user's `on_rejection` hook, whatever body type it builds.
pub(crate) struct Hook<R>(Arc<RejectFn<R>>);

impl<R> Hook<R> {
    pub(crate) fn new<F, B>(respond: F) -> Self
    where
        F: Fn(&R) -> Response<B> + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        Hook(Arc::new(move |rejection: &R| {
            respond(rejection).map(Into::into)
        }))
    }
}
