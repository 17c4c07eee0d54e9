//! Any `:authority` accepted on a connection of `serve`, where it routes nothing.
//!
//! h2 parses a request's `:authority` into `http::uri::Authority` when the header block
//! arrives, before hyper or any layer sees the request, and resets the stream
//! (`PROTOCOL_ERROR`) when it cannot: gRPC's C core (grpcio, and the other languages built on
//! it) sends a Unix socket's path, percent-encoded, as the authority (`tmp%2Fserve.sock` for
//! `unix:/tmp/serve.sock`), and a client may send any name on TCP. h2 has no setting for it
//! (hyperium/h2#487 asks for one). So the bytes are looked at before h2 reads them: each
//! HEADERS frame's block is read (HPACK, [`block`]) and an authority `http` refuses is replaced
//! by one of the same length it accepts (its bytes other than letters, digits, `.` and `-`
//! made `_`), the frames written anew around the new block. Every other byte passes as it
//! came; a connection that does not open with HTTP/2's preface (HTTP/1) passes whole.
//!
//! A block that is not HPACK passes as it came (h2 then closes the connection, as it always
//! did); what cannot be followed (a header block of more than [`MAX_HELD`] bytes, a frame amid
//! a block's frames) ends the looking for that connection: what follows passes as it comes,
//! and h2 judges it as it always did. No replacement ever changes the size of an entry of
//! HPACK's dynamic table, so h2 and the client agree on that table whatever happens.

mod block;
mod huffman;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes of one header block's frames held to be looked at (h2 takes 16 KiB of
/// headers by default): past it, the connection's frames pass as they come.
pub(crate) const MAX_HELD: usize = 64 * 1024;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame written: the least SETTINGS_MAX_FRAME_SIZE a peer may set, so h2 takes it
/// whatever it set.
const MAX_FRAME: usize = 16_384;

pin_project_lite::pin_project! {
    /// A connection whose requests' `:authority` h2 accepts, whatever the client sent. With
    /// `any` false, every byte passes as it comes.
    pub(crate) struct AnyAuthority<Io> {
        #[pin]
        io: Io,
        state: State,
        // Bytes read and not yet looked at.
        input: BytesMut,
        // Bytes looked at, for h2.
        output: BytesMut,
    }
}

enum State {
    /// The first bytes: HTTP/2's preface, or another protocol.
    Preface,
    /// Between frames, or `forward` bytes into a frame's payload that pass as they come.
    Frames { forward: usize },
    /// A header block whose frames are held until its last: the frames as sent, the block's
    /// fragments, and what its HEADERS frame said.
    Held {
        frames: Vec<u8>,
        block: Vec<u8>,
        stream: u32,
        flags: u8,
        priority: Option<[u8; 5]>,
    },
    /// Everything as it comes.
    Through,
}

impl<Io> AnyAuthority<Io> {
    pub(crate) fn new(io: Io, any: bool) -> Self {
        Self {
            io,
            state: if any { State::Preface } else { State::Through },
            input: BytesMut::new(),
            output: BytesMut::new(),
        }
    }
}

impl<Io: AsyncRead> AsyncRead for AnyAuthority<Io> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut this = self.project();
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output[..n]);
                this.output.advance(n);
                return Poll::Ready(Ok(()));
            }
            if matches!(this.state, State::Through) && this.input.is_empty() {
                return this.io.poll_read(cx, buf);
            }
            let mut chunk = [0; 8 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(this.io.as_mut().poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // The end: what is held goes as it is, then the end itself.
                if let State::Held { frames, .. } = &*this.state {
                    this.output.extend_from_slice(frames);
                }
                this.output.extend_from_slice(this.input);
                this.input.clear();
                *this.state = State::Through;
                if this.output.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.input.extend_from_slice(read.filled());
            look(this.state, this.input, this.output);
        }
    }
}

/// Moves what `input` holds to `output`, as `state` says, as far as it can.
fn look(state: &mut State, input: &mut BytesMut, output: &mut BytesMut) {
    loop {
        match state {
            State::Through => {
                output.extend_from_slice(input);
                input.clear();
                return;
            }
            State::Preface => {
                let n = input.len().min(PREFACE.len());
                if input[..n] != PREFACE[..n] {
                    *state = State::Through;
                } else if n < PREFACE.len() {
                    return;
                } else {
                    output.extend_from_slice(&input.split_to(n));
                    *state = State::Frames { forward: 0 };
                }
            }
            State::Frames { forward } if *forward > 0 => {
                let n = (*forward).min(input.len());
                if n == 0 {
                    return;
                }
                output.extend_from_slice(&input.split_to(n));
                *forward -= n;
            }
            State::Frames { .. } | State::Held { .. } => {
                if input.len() < 9 {
                    return;
                }
                let length = usize::from(input[0]) << 16
                    | usize::from(input[1]) << 8
                    | usize::from(input[2]);
                let (kind, flags) = (input[3], input[4]);
                let stream = u32::from_be_bytes([input[5], input[6], input[7], input[8]]);
                // A frame between a block's frames, or a block too long to hold: h2 will
                // refuse the first and may refuse the second; either way, stop looking.
                let held = match &*state {
                    State::Held {
                        frames, stream: of, ..
                    } => Some((frames.len(), kind == CONTINUATION && stream == *of)),
                    _ => None,
                };
                let held = match held {
                    Some((held, true)) => held,
                    Some((_, false)) => {
                        give_up(state, output);
                        continue;
                    }
                    None if kind != HEADERS => {
                        output.extend_from_slice(&input.split_to(9));
                        *state = State::Frames { forward: length };
                        continue;
                    }
                    None => 0,
                };
                if held + 9 + length > MAX_HELD {
                    give_up(state, output);
                    continue;
                }
                if input.len() < 9 + length {
                    return;
                }
                let frame = input.split_to(9 + length);
                if !hold(state, &frame, kind, flags, stream) {
                    output.extend_from_slice(&frame);
                    give_up(state, output);
                    continue;
                }
                if flags & END_HEADERS != 0 {
                    release(state, output);
                }
            }
        }
    }
}

/// Stops looking: the frames held pass as they came, and so does all that follows.
fn give_up(state: &mut State, output: &mut BytesMut) {
    if let State::Held { frames, .. } = state {
        output.extend_from_slice(frames);
    }
    *state = State::Through;
}

/// Adds a HEADERS or CONTINUATION `frame` to the block held; false when its padding or
/// priority do not fit in it (h2 refuses it then).
fn hold(state: &mut State, frame: &[u8], kind: u8, flags: u8, stream: u32) -> bool {
    let payload = &frame[9..];
    if kind == CONTINUATION {
        if let State::Held { frames, block, .. } = state {
            frames.extend_from_slice(frame);
            block.extend_from_slice(payload);
        }
        return true;
    }
    let mut start = 0;
    let mut padding = 0;
    if flags & PADDED != 0 {
        let Some(&pad) = payload.first() else {
            return false;
        };
        padding = usize::from(pad);
        start = 1;
    }
    let mut priority = None;
    if flags & PRIORITY != 0 {
        let Some(bytes) = payload.get(start..start + 5) else {
            return false;
        };
        priority = bytes.try_into().ok();
        start += 5;
    }
    let Some(fragment) = payload
        .len()
        .checked_sub(padding)
        .and_then(|end| payload.get(start..end))
    else {
        return false;
    };
    *state = State::Held {
        frames: frame.to_vec(),
        block: fragment.to_vec(),
        stream,
        flags,
        priority,
    };
    true
}

/// Hands on the block held, its authority replaced if it must be (in frames written anew),
/// else its frames as they came.
fn release(state: &mut State, output: &mut BytesMut) {
    let held = std::mem::replace(state, State::Frames { forward: 0 });
    let State::Held {
        frames,
        block,
        stream,
        flags,
        priority,
    } = held
    else {
        return;
    };
    match block::rewrite(&block) {
        None => output.extend_from_slice(&frames),
        Some(block) => write_frames(output, stream, flags, priority, &block),
    }
}

/// `block` as a HEADERS frame (its END_STREAM and priority as `flags` said, no padding) and as
/// many CONTINUATION frames as it needs.
fn write_frames(
    out: &mut BytesMut,
    stream: u32,
    flags: u8,
    priority: Option<[u8; 5]>,
    block: &[u8],
) {
    let head = |out: &mut BytesMut, length: usize, kind: u8, flags: u8| {
        out.extend_from_slice(&(length as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
    };
    let room = MAX_FRAME - priority.map_or(0, |_| 5);
    let (first, mut rest) = block.split_at(block.len().min(room));
    let mut first_flags = flags & (END_STREAM | PRIORITY);
    if rest.is_empty() {
        first_flags |= END_HEADERS;
    }
    head(
        out,
        first.len() + priority.map_or(0, |_| 5),
        HEADERS,
        first_flags,
    );
    if let Some(priority) = priority {
        out.extend_from_slice(&priority);
    }
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (part, next) = rest.split_at(rest.len().min(MAX_FRAME));
        let last = if next.is_empty() { END_HEADERS } else { 0 };
        head(out, part.len(), CONTINUATION, last);
        out.extend_from_slice(part);
        rest = next;
    }
}

impl<Io: AsyncWrite> AsyncWrite for AnyAuthority<Io> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::{PREFACE, State, look};

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        frame.extend([kind, flags]);
        frame.extend(stream.to_be_bytes());
        frame.extend(payload);
        frame
    }

    /// What h2 reads of `sent`, fed `step` bytes at a time.
    fn seen(sent: &[u8], step: usize) -> Vec<u8> {
        let (mut state, mut input, mut output) = (State::Preface, BytesMut::new(), BytesMut::new());
        for chunk in sent.chunks(step) {
            input.extend_from_slice(chunk);
            look(&mut state, &mut input, &mut output);
        }
        output.to_vec()
    }

    /// `:method POST` and an `:authority` literal that the dynamic table indexes.
    fn block(authority: &[u8]) -> Vec<u8> {
        let mut block = vec![0x83, 0x41, authority.len() as u8];
        block.extend(authority);
        block
    }

    #[test]
    fn a_block_in_padded_and_continued_frames_is_written_anew() {
        let priority = [0, 0, 0, 0, 15];
        let sent_block = block(b"a b");
        let mut headers = vec![3]; // three bytes of padding
        headers.extend(priority);
        headers.extend(&sent_block[..2]);
        headers.extend([0; 3]);
        let mut sent = PREFACE.to_vec();
        sent.extend(frame(0x4, 0, 0, &[]));
        // HEADERS: END_STREAM, PADDED, PRIORITY; its CONTINUATION: END_HEADERS.
        sent.extend(frame(0x1, 0x1 | 0x8 | 0x20, 1, &headers));
        sent.extend(frame(0x9, 0x4, 1, &sent_block[2..]));
        sent.extend(frame(0x0, 0x1, 3, b"body"));
        let mut expected = PREFACE.to_vec();
        expected.extend(frame(0x4, 0, 0, &[]));
        let mut payload = priority.to_vec();
        payload.extend(block(b"a_b"));
        expected.extend(frame(0x1, 0x1 | 0x4 | 0x20, 1, &payload));
        expected.extend(frame(0x0, 0x1, 3, b"body"));
        for step in [1, 7, sent.len()] {
            assert_eq!(seen(&sent, step), expected, "fed {step} bytes at a time");
        }
    }

    #[test]
    fn what_needs_no_replacement_passes_byte_for_byte() {
        let mut sent = PREFACE.to_vec();
        sent.extend(frame(0x1, 0x4, 1, &block(b"localhost")));
        // Not HPACK (a string longer than the block): h2 closes the connection for it.
        sent.extend(frame(0x1, 0x4, 3, &[0x83, 0x41, 0x02, b'%']));
        assert_eq!(seen(&sent, 5), sent);
        let http1 = b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n";
        assert_eq!(seen(http1, 3), http1);
    }

    #[test]
    fn a_frame_amid_a_blocks_frames_stops_the_looking() {
        let mut sent = PREFACE.to_vec();
        sent.extend(frame(0x1, 0, 1, &block(b"a b")));
        sent.extend(frame(0x0, 0, 1, b"x"));
        sent.extend(frame(0x1, 0x4, 3, &block(b"a b")));
        assert_eq!(seen(&sent, 4), sent);
    }
}
