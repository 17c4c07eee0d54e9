//! An upgraded connection (a WebSocket, or another protocol) joined to the upstream's: bytes
//! copied both ways until either side closes, or until the drain deadline of a shutdown, when
//! a WebSocket tunnel ends each direction after its current frame with a close frame (1001,
//! "going away"), so both sides see a clean close rather than a reset.

use std::time::Duration;

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::frames::{CLOSE_TO_CLIENT, Frames, close_to_server};
use crate::runtime::Shutdown;

/// How long a direction may take, at the drain deadline, to finish the frame it is in.
const FINISH_FRAME: Duration = Duration::from_secs(1);

/// Copies between `client` and `upstream` until both directions end.
pub(crate) async fn join(
    client: Upgraded,
    upstream: Upgraded,
    websocket: bool,
    shutdown: Shutdown,
) {
    let (client_read, client_write) = tokio::io::split(TokioIo::new(client));
    let (upstream_read, upstream_write) = tokio::io::split(TokioIo::new(upstream));
    let mask = fastrand::u32(..).to_be_bytes();
    let to_server = close_to_server(mask);
    let (to_upstream, to_client) = if websocket {
        (Some(&to_server[..]), Some(&CLOSE_TO_CLIENT[..]))
    } else {
        (None, None)
    };
    let _ = tokio::join!(
        pump(client_read, upstream_write, to_upstream, shutdown.clone()),
        pump(upstream_read, client_write, to_client, shutdown),
    );
}

/// One direction: `from` to `to`; at the drain deadline, after the current frame, `close` (a
/// WebSocket close frame) if given.
async fn pump<R, W>(
    mut from: R,
    mut to: W,
    close: Option<&[u8]>,
    mut shutdown: Shutdown,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut frames = close.map(|_| Frames::default());
    let mut buffer = vec![0; 8 * 1024];
    let mut cutting = false;
    loop {
        if cutting && frames.as_ref().is_none_or(Frames::at_boundary) {
            if let Some(close) = close {
                to.write_all(close).await?;
            }
            return to.shutdown().await;
        }
        let read = if cutting {
            match tokio::time::timeout(FINISH_FRAME, from.read(&mut buffer)).await {
                Ok(read) => read?,
                // The frame does not end: close without a close frame.
                Err(_) => return to.shutdown().await,
            }
        } else {
            tokio::select! {
                read = from.read(&mut buffer) => read?,
                () = shutdown.cut() => {
                    cutting = true;
                    continue;
                }
            }
        };
        if read == 0 {
            return to.shutdown().await;
        }
        let mut end = read;
        if let Some(frames) = &mut frames {
            if cutting {
                // What follows the frame's end is the start of one that will not be sent.
                end = frames.through_frame_end(&buffer[..read]);
            } else {
                frames.read(&buffer[..read]);
            }
        }
        to.write_all(&buffer[..end]).await?;
    }
}
