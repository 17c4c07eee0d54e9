//! A `ratelimit-gateway` command run as a process (the binary cargo built for the tests), its
//! first line read, killed when the test ends. Shared by the `proxy` and `serve` test binaries.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

/// The installed program, as cargo built it for this test binary.
pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_ratelimit-gateway");

/// A running command, killed when dropped.
pub(crate) struct GatewayProcess {
    pub(crate) child: Child,
}

impl GatewayProcess {
    /// Runs `ratelimit-gateway <command> <config>` with its standard error to `stderr`; returns
    /// it, the first line it printed, and its standard output after that line.
    pub(crate) fn start(
        command: &str,
        config: &Path,
        stderr: Stdio,
    ) -> (Self, String, BufReader<ChildStdout>) {
        let mut child = Command::new(BINARY)
            .arg(command)
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        (Self { child }, line, stdout)
    }

    /// Waits for the process to exit with status 0, failing the test after `within`.
    pub(crate) async fn exits_successfully_within(&mut self, within: Duration) {
        let deadline = std::time::Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still running {within:?} later"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(status.success(), "{status}");
    }

    /// Sends it `signal` (`-HUP`, `-TERM`).
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
