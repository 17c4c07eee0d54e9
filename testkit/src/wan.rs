//! [`WanLink`]: a link between regions, modelled on one machine. A TCP proxy on a free loopback
//! port forwards to one address, adding a latency each way; on command it partitions (holds
//! every byte, both ways, on open connections and new ones, as a cut link does, until healed,
//! when the held bytes arrive late and in order) and drops its connections (as a link that
//! resets them).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// A proxy that models a link between regions: see the module's docs. Stopped when dropped.
#[derive(Debug)]
pub struct WanLink {
    port: u16,
    control: Arc<Control>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Control {
    /// The latency added each way, µs.
    latency_us: AtomicU64,
    partitioned: watch::Sender<bool>,
    /// Bumped to drop every open connection.
    drops: watch::Sender<u64>,
    stop: watch::Sender<bool>,
}

impl WanLink {
    /// A link to `target` adding `latency` each way.
    pub fn start(target: SocketAddr, latency: Duration) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let port = listener
            .local_addr()
            .expect("the listener's address")
            .port();
        let control = Arc::new(Control {
            latency_us: AtomicU64::new(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX)),
            partitioned: watch::channel(false).0,
            drops: watch::channel(0).0,
            stop: watch::channel(false).0,
        });
        let serving = control.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the link's runtime");
            runtime.block_on(serve(listener, target, serving));
        });
        Self {
            port,
            control,
            thread: Some(thread),
        }
    }

    /// The link's address: connect here to reach the target through it.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `redis://` URL of the link's address.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// Sets the latency added each way to bytes read from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.control.latency_us.store(
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Cuts the link: no byte crosses, either way, until [`heal`](Self::heal).
    pub fn partition(&self) {
        self.control.partitioned.send_replace(true);
    }

    /// Mends the link: what was held crosses, late, in order.
    pub fn heal(&self) {
        self.control.partitioned.send_replace(false);
    }

    /// Drops every open connection at once (both ends see it closed); new ones are accepted.
    pub fn drop_connections(&self) {
        self.control.drops.send_modify(|drops| *drops += 1);
    }
}

impl Drop for WanLink {
    fn drop(&mut self) {
        self.control.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(listener: std::net::TcpListener, target: SocketAddr, control: Arc<Control>) {
    let listener = TcpListener::from_std(listener).expect("a tokio listener");
    let mut stop = control.stop.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => return,
        };
        let Ok((client, _)) = accepted else { continue };
        let control = control.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let mut drops = control.drops.subscribe();
            let mut stop = control.stop.subscribe();
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::select! {
                _ = pump(client_read, server_write, &control) => {}
                _ = pump(server_read, client_write, &control) => {}
                _ = drops.changed() => {}
                _ = stop.changed() => {}
            }
        });
    }
}

/// Forwards bytes from `from` to `to`, each chunk written `latency` after it was read, and none
/// while the link is partitioned. Ends when either side closes.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    control: &Control,
) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut partitioned = control.partitioned.subscribe();
    let write = async move {
        while let Some((due, bytes)) = receiver.recv().await {
            tokio::time::sleep_until(due).await;
            while *partitioned.borrow_and_update() {
                if partitioned.changed().await.is_err() {
                    return;
                }
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    let read = async move {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let latency = Duration::from_micros(control.latency_us.load(Ordering::Relaxed));
                    if sender
                        .send((Instant::now() + latency, buffer[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    // The reader ending (its side closed) ends the pump once what it read was written.
    tokio::join!(read, write);
}
