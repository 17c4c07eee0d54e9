//! A one-method gRPC service, `demo.Greeter/Hello` (a UTF-8 name in, a greeting out), written
//! without generated code: a codec of UTF-8 strings and a tower service that routes the method,
//! as `tonic-build` would generate them.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut};
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

/// The method's path.
pub(crate) const HELLO: &str = "/demo.Greeter/Hello";

/// Messages as UTF-8 strings.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Utf8Codec;

impl Codec for Utf8Codec {
    type Encode = String;
    type Decode = String;
    type Encoder = Utf8Codec;
    type Decoder = Utf8Codec;

    fn encoder(&mut self) -> Self::Encoder {
        Utf8Codec
    }

    fn decoder(&mut self) -> Self::Decoder {
        Utf8Codec
    }
}

impl Encoder for Utf8Codec {
    type Item = String;
    type Error = Status;

    fn encode(&mut self, item: String, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(item.as_bytes());
        Ok(())
    }
}

impl Decoder for Utf8Codec {
    type Item = String;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<String>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| Status::invalid_argument("the message is not UTF-8"))
    }
}

/// The service: `Hello` greets, any other method is unimplemented.
#[derive(Clone, Debug, Default)]
pub(crate) struct Greeter;

impl NamedService for Greeter {
    const NAME: &'static str = "demo.Greeter";
}

impl tower::Service<http::Request<Body>> for Greeter {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(async move {
            if request.uri().path() != HELLO {
                return Ok(Status::unimplemented("no such method").into_http());
            }
            let hello = tower::service_fn(|request: Request<String>| async move {
                Ok::<_, Status>(Response::new(format!("hello, {}", request.into_inner())))
            });
            Ok(tonic::server::Grpc::new(Utf8Codec)
                .unary(hello, request)
                .await)
        })
    }
}

/// Calls `Hello` with `name` over `channel`, sending `metadata` (e.g. an API key).
pub(crate) async fn hello(
    channel: tonic::transport::Channel,
    name: &str,
    metadata: &[(&'static str, &str)],
) -> Result<Response<String>, Status> {
    let mut client = tonic::client::Grpc::new(channel);
    client
        .ready()
        .await
        .map_err(|err| Status::unavailable(err.to_string()))?;
    let mut request = Request::new(name.to_owned());
    for (key, value) in metadata {
        let value = value
            .parse()
            .map_err(|_| Status::invalid_argument("metadata values are ASCII"))?;
        request.metadata_mut().insert(*key, value);
    }
    client
        .unary(
            request,
            http::uri::PathAndQuery::from_static(HELLO),
            Utf8Codec,
        )
        .await
}
