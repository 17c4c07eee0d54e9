//! Servers for the supervisor's tests: a scripted fake Redis that needs nothing installed, ports
//! that refuse or never answer, and a real `redis-server` for the one test that wants real replies.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// What the fake server does with a PING (every other command, e.g. the connection's set-up,
/// gets `+OK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ping {
    /// `+PONG`.
    Pong,
    /// No reply, and none to anything after it on that connection: a frozen server.
    Silent,
    /// `-READONLY`: a replica after a failover.
    ReadOnly,
    /// `-MASTERDOWN`: a replica that lost its primary.
    MasterDown,
    /// `-ERR`: a command error on a healthy connection.
    Error,
    /// Closes the connection: a server that went away.
    Close,
}

struct Shared {
    ping: Mutex<Ping>,
    accepted: AtomicUsize,
    stopped: AtomicBool,
}

/// A fake Redis on a loopback port, one thread per connection, speaking just enough RESP.
pub(super) struct FakeRedis {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeRedis {
    pub(super) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let shared = Arc::new(Shared {
            ping: Mutex::new(Ping::Pong),
            accepted: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
        });
        let accepting = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if accepting.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                accepting.accepted.fetch_add(1, Ordering::SeqCst);
                let shared = accepting.clone();
                thread::spawn(move || serve(stream, &shared));
            }
        });
        Self { addr, shared }
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on, PINGs get `ping`.
    pub(super) fn set(&self, ping: Ping) {
        *self.shared.ping.lock().unwrap() = ping;
    }

    /// Connections accepted so far.
    pub(super) fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FakeRedis {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees the flag and ends.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, shared: &Shared) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut silent = false;
    while let Some(command) = read_command(&mut reader) {
        let ping = *shared.ping.lock().unwrap();
        let reply: &[u8] = if !command.eq_ignore_ascii_case("PING") {
            b"+OK\r\n"
        } else {
            match ping {
                Ping::Pong => b"+PONG\r\n",
                Ping::Silent => {
                    silent = true;
                    b""
                }
                Ping::ReadOnly => b"-READONLY You can't write against a read only replica.\r\n",
                Ping::MasterDown => b"-MASTERDOWN Link with MASTER is down\r\n",
                Ping::Error => b"-ERR unknown command 'PING'\r\n",
                Ping::Close => {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
            }
        };
        if !silent && writer.write_all(reply).is_err() {
            return;
        }
    }
}

/// Reads one command (an array of bulk strings) and returns its name; `None` at the end of the
/// stream.
fn read_command(reader: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let count: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut name = None;
    for _ in 0..count {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let length: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut bulk = vec![0; length + 2];
        reader.read_exact(&mut bulk).ok()?;
        bulk.truncate(length);
        name.get_or_insert_with(|| String::from_utf8_lossy(&bulk).into_owned());
    }
    name
}

/// A loopback port bound but not listening, so connecting to it is refused for as long as the
/// socket lives (and no other test can take the port meanwhile).
pub(super) fn refusing_port() -> (tokio::net::TcpSocket, SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind("127.0.0.1:0".parse().expect("an address"))
        .expect("bind a loopback port");
    let addr = socket.local_addr().expect("a bound socket has an address");
    (socket, addr)
}

/// A listener that never accepts: the kernel completes the TCP handshake, and nothing ever
/// answers the connection's set-up, so an attempt to connect hangs until its timeout.
pub(super) fn unanswering_port() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind a loopback port")
}

/// A real `redis-server` on a free loopback port (the integration tests' own: saving off, in a
/// directory of its own), killed when dropped.
pub(super) use testkit::RedisServer;
