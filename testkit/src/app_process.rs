//! An app in a process of its own, so that several share one Redis as replicas of a service do:
//! the benchmark runs itself again with `--serve <url>`; the child listens on a free loopback
//! port, prints the address as its first line, and serves until its standard input closes.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use crate::BoxError;

/// The parent's side: a child app process, killed when dropped.
#[derive(Debug)]
pub struct AppProcess {
    child: Child,
    address: SocketAddr,
}

impl AppProcess {
    /// Runs this program again with `--serve <url>` and reads the address it listens on.
    pub fn start(url: &str) -> Result<Self, BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--serve", url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let address = child
            .stdout
            .take()
            .ok_or_else(|| BoxError::from("no stdout"))
            .and_then(|stdout| {
                let mut line = String::new();
                BufReader::new(stdout).read_line(&mut line)?;
                line.trim()
                    .parse()
                    .map_err(|_| format!("expected the app's address, read {line:?}").into())
            });
        match address {
            Ok(address) => Ok(Self { child, address }),
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("an app process did not start: {err}").into())
            }
        }
    }

    /// The address the app listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The child's process ID.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Closes the app's standard input, which ends it, and waits until it has.
    pub fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for AppProcess {
    fn drop(&mut self) {
        // Already gone (stopped) is fine.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's side: a listener on a free loopback port, whose address it prints for the parent
/// (the first line of its output), and a thread that ends the process when its standard input
/// closes (the parent stopped it, or is gone).
pub async fn listen_for_parent() -> std::io::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    Ok(listener)
}
