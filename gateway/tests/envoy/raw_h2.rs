//! A cleartext HTTP/2 client written frame by frame, for what no Rust client sends: an
//! `:authority` that `http::uri::Authority` refuses (grpcio's percent-encoded socket path, a
//! space), which the `http` crate cannot put in a `Uri` and so neither `h2` nor tonic can send.
//! `ShouldRateLimit` calls one after another on one connection; the header blocks are written
//! in HPACK's plainest forms (no Huffman coding).

use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// What the server did with the call.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// The response message.
    Answered(Box<RateLimitResponse>),
    /// The stream was reset with this HTTP/2 error code (1: PROTOCOL_ERROR).
    Reset(u32),
}

/// Calls `ShouldRateLimit` with `request` over `io` `times` times, one call after another on
/// one connection, sending `authority` as `:authority`: the first call as a literal the
/// dynamic table indexes (as gRPC's C core sends it), the others as that table's entry.
pub(crate) async fn should_rate_limit<Io>(
    mut io: Io,
    authority: &[u8],
    request: &RateLimitRequest,
    times: u32,
) -> Vec<Answer>
where
    Io: AsyncRead + AsyncWrite + Unpin,
{
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    io.write_all(&out).await.expect("the preface written");
    let mut answers = Vec::new();
    for call in 0..times {
        let stream = 2 * call + 1;
        let mut out = Vec::new();
        frame(
            &mut out,
            HEADERS,
            END_HEADERS,
            stream,
            &header_block(authority, call > 0),
        );
        let message = request.encode_to_vec();
        let mut body = vec![0];
        body.extend((message.len() as u32).to_be_bytes());
        body.extend(message);
        frame(&mut out, DATA, END_STREAM, stream, &body);
        io.write_all(&out).await.expect("the request written");
        answers.push(answer(&mut io, stream).await);
    }
    answers
}

/// Reads frames until the call on `stream` is answered or reset, acknowledging settings.
async fn answer<Io>(io: &mut Io, stream: u32) -> Answer
where
    Io: AsyncRead + AsyncWrite + Unpin,
{
    let mut data = Vec::new();
    loop {
        let mut head = [0; 9];
        io.read_exact(&mut head)
            .await
            .expect("a frame from the server");
        let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, on) = (
            head[3],
            u32::from_be_bytes([head[5], head[6], head[7], head[8]]),
        );
        let mut payload = vec![0; length];
        io.read_exact(&mut payload)
            .await
            .expect("the frame's payload");
        match kind {
            SETTINGS if head[4] & 0x1 == 0 => {
                let mut ack = Vec::new();
                frame(&mut ack, SETTINGS, 0x1, 0, &[]);
                io.write_all(&ack).await.expect("the settings acknowledged");
            }
            RST_STREAM if on == stream => {
                return Answer::Reset(u32::from_be_bytes(payload[..4].try_into().unwrap()));
            }
            GOAWAY => panic!("the server closed the connection: {payload:?}"),
            DATA if on == stream => {
                data.extend(payload);
                if data.len() >= 5 {
                    let size = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
                    if data.len() >= 5 + size {
                        let answer = RateLimitResponse::decode(&data[5..5 + size]);
                        return Answer::Answered(Box::new(answer.expect("a RateLimitResponse")));
                    }
                }
            }
            _ => {}
        }
    }
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
}

/// `:method POST`, `:scheme http`, `:path`, `:authority` (`indexed`: the dynamic table's
/// first entry, which the first call's authority is), `content-type`, `te`.
fn header_block(authority: &[u8], indexed: bool) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // indexed: `:method POST`, `:scheme http`
    // Literal without indexing, name index 4: `:path`.
    block.push(0x04);
    string(
        &mut block,
        b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    );
    if indexed {
        // Indexed, 62: the dynamic table's first (and only) entry.
        block.push(0x80 | 62);
    } else {
        // Literal with incremental indexing, name index 1: `:authority`.
        block.push(0x41);
        string(&mut block, authority);
    }
    // Literal without indexing, name index 31 (15 + 16): `content-type`.
    block.extend([0x0f, 0x10]);
    string(&mut block, b"application/grpc");
    // Literal without indexing, a new name: `te`.
    block.push(0x00);
    string(&mut block, b"te");
    string(&mut block, b"trailers");
    block
}

/// A string literal without Huffman coding (lengths below 127 here).
fn string(block: &mut Vec<u8>, text: &[u8]) {
    assert!(text.len() < 127);
    block.push(text.len() as u8);
    block.extend(text);
}
