//! Where a command listens: a TCP address or a Unix domain socket, and the streams accepted.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
#[cfg(unix)]
use tokio::net::{UnixListener, UnixStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A bound listener.
pub enum Listener {
    /// A TCP address, with TLS or without.
    Tcp(TcpListener, Option<TlsAcceptor>),
    /// A Unix domain socket, and its path (removed when the listener is dropped).
    #[cfg(unix)]
    Unix(UnixListener, PathBuf),
}

/// Where a listener is, for logs and the start-up line: `http://127.0.0.1:8080`,
/// `https://127.0.0.1:8443` or `unix:/run/ratelimit.sock`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A TCP address with TLS.
    Tls(SocketAddr),
    /// A Unix domain socket's path.
    Unix(PathBuf),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(addr) => write!(f, "http://{addr}"),
            Address::Tls(addr) => write!(f, "https://{addr}"),
            Address::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.address() {
            Ok(address) => write!(f, "Listener({address})"),
            Err(err) => write!(f, "Listener({err})"),
        }
    }
}

impl Listener {
    /// Listens on a TCP address (port 0 picks a free one).
    pub async fn tcp(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|err| io::Error::new(err.kind(), format!("cannot listen on {addr}: {err}")))?;
        Ok(Listener::Tcp(listener, None))
    }

    /// This TCP listener with TLS: the handshake is the first thing each connection does, within
    /// the header timeout.
    pub fn with_tls(mut self, acceptor: TlsAcceptor) -> Self {
        if let Listener::Tcp(_, tls) = &mut self {
            *tls = Some(acceptor);
        }
        self
    }

    /// Whether clients speak TLS to it.
    pub fn is_tls(&self) -> bool {
        matches!(self, Listener::Tcp(_, Some(_)))
    }

    /// Listens on a Unix domain socket at `path`, replacing a socket file left there by a
    /// process that is gone (never another kind of file).
    #[cfg(unix)]
    pub fn unix(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another process listens there", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("cannot listen on {}: {err}", path.display()),
            )
        })?;
        Ok(Listener::Unix(listener, path.to_owned()))
    }

    /// Where it listens (a TCP port 0 resolved).
    pub fn address(&self) -> io::Result<Address> {
        match self {
            Listener::Tcp(listener, None) => listener.local_addr().map(Address::Tcp),
            Listener::Tcp(listener, Some(_)) => listener.local_addr().map(Address::Tls),
            #[cfg(unix)]
            Listener::Unix(_, path) => Ok(Address::Unix(path.clone())),
        }
    }

    /// The next connection, taken off this event loop for a worker to take on, and the
    /// client's address (none on a Unix socket).
    pub(crate) async fn accept(&self) -> io::Result<(Detached, Option<SocketAddr>)> {
        match self {
            Listener::Tcp(listener, tls) => {
                let (stream, peer) = listener.accept().await?;
                // Answers are small and written whole: no reason to wait for more.
                stream.set_nodelay(true)?;
                Ok((Detached::Tcp(stream.into_std()?, tls.clone()), Some(peer)))
            }
            #[cfg(unix)]
            Listener::Unix(listener, _) => {
                let (stream, _) = listener.accept().await?;
                Ok((Detached::Unix(stream.into_std()?), None))
            }
        }
    }
}

#[cfg(unix)]
impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// An accepted connection, before its TLS handshake if it has one.
pub(crate) enum Accepted {
    Ready(Stream),
    Handshake(TlsAcceptor, TcpStream),
}

/// An accepted connection off the event loop that accepted it, to be handed to a worker
/// ([`super::Workers`]), which takes it on with [`Detached::attach`].
pub(crate) enum Detached {
    Tcp(std::net::TcpStream, Option<TlsAcceptor>),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

impl Detached {
    /// The connection on the event loop of the calling task.
    pub(crate) fn attach(self) -> io::Result<Accepted> {
        match self {
            Detached::Tcp(stream, None) => {
                Ok(Accepted::Ready(Stream::Tcp(TcpStream::from_std(stream)?)))
            }
            Detached::Tcp(stream, Some(tls)) => {
                Ok(Accepted::Handshake(tls, TcpStream::from_std(stream)?))
            }
            #[cfg(unix)]
            Detached::Unix(stream) => {
                Ok(Accepted::Ready(Stream::Unix(UnixStream::from_std(stream)?)))
            }
        }
    }
}

impl Accepted {
    /// The stream, its handshake done.
    pub(crate) async fn stream(self) -> io::Result<Stream> {
        match self {
            Accepted::Ready(stream) => Ok(stream),
            Accepted::Handshake(tls, stream) => {
                Ok(Stream::Tls(Box::new(tls.accept(stream).await?)))
            }
        }
    }
}

/// An accepted connection.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    #[cfg(unix)]
    Unix(UnixStream),
}

macro_rules! each {
    ($stream:expr, $inner:ident => $body:expr) => {
        match $stream {
            Stream::Tcp($inner) => $body,
            Stream::Tls($inner) => $body,
            #[cfg(unix)]
            Stream::Unix($inner) => $body,
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self.get_mut(), io => Pin::new(io).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), io => Pin::new(io).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), io => Pin::new(io).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        each!(self, io => io.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), io => Pin::new(io).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), io => Pin::new(io).poll_shutdown(cx))
    }
}
