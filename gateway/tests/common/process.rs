//! A `ratelimit-gateway` command run as a process (the binary cargo built for the tests), its
//! first line read, killed when the test ends. Shared by the `proxy` and `serve` test binaries.

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a test waits for a line the process should print: its first one, or an access log
/// line of a request already answered. A process that hangs fails the test instead of hanging it.
const LINE_TIMEOUT: Duration = Duration::from_secs(20);

/// The installed program, as cargo built it for this test binary.
pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_ratelimit-gateway");

/// A running command, killed when dropped.
pub(crate) struct GatewayProcess {
    pub(crate) child: Child,
    /// Its standard error (the messages), after the start-up line.
    // Shared by test binaries, not all of which read the messages.
    #[allow(dead_code)]
    pub(crate) stderr: Output,
    /// The messages before the start-up line (what building the limits logged).
    #[allow(dead_code)]
    pub(crate) before: Vec<String>,
}

impl GatewayProcess {
    /// Runs `ratelimit-gateway <command> <config>`, its messages also written to `log` if given;
    /// returns it, the start-up line it wrote on standard error (`proxy: listening on ...`,
    /// taken out of a text or JSON message, within [`LINE_TIMEOUT`]), and its standard output
    /// (the access log alone).
    pub(crate) fn start(
        command: &str,
        config: &Path,
        log: Option<std::fs::File>,
    ) -> (Self, String, Output) {
        Self::start_with_env(command, config, log, &[])
    }

    /// [`start`](Self::start) with `env` added to its environment (`RUST_LOG`).
    pub(crate) fn start_with_env(
        command: &str,
        config: &Path,
        log: Option<std::fs::File>,
        env: &[(&str, &str)],
    ) -> (Self, String, Output) {
        let mut child = Command::new(BINARY)
            .arg(command)
            .arg(config)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = Output::read(BufReader::new(child.stdout.take().unwrap()), None);
        let stderr = Output::read(BufReader::new(child.stderr.take().unwrap()), log);
        let announced = format!("{command}: listening on ");
        let mut before = Vec::new();
        let line = loop {
            let Some(message) = stderr.try_next_line() else {
                panic!("no {announced:?} within {LINE_TIMEOUT:?}; it said {before:#?}");
            };
            match started_line(&message, &announced) {
                Some(line) => break line,
                None => before.push(message),
            }
        };
        let process = Self {
            child,
            stderr,
            before,
        };
        (process, line, stdout)
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

    /// Its next message (on standard error) that contains `text`, the ones before it skipped;
    /// fails the test if none comes within [`LINE_TIMEOUT`] of the one before.
    // Shared by test binaries, not all of which read the messages.
    #[allow(dead_code)]
    pub(crate) fn message_containing(&self, text: &str) -> String {
        loop {
            let message = self.stderr.next_line();
            if message.contains(text) {
                return message;
            }
        }
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

/// The start-up line in `message` (text: after the time, level and target; JSON: its
/// `message`), if it is the one that starts with `announced`.
fn started_line(message: &str, announced: &str) -> Option<String> {
    let text = if message.starts_with('{') {
        let value: serde_json::Value = serde_json::from_str(message).ok()?;
        value["message"].as_str()?.to_owned()
    } else {
        message.to_owned()
    };
    text.find(announced).map(|at| text[at..].to_owned())
}

/// A process's standard output or error, line by line, read on a thread of its own so that a wait for a
/// line can be bounded in time.
pub(crate) struct Output(mpsc::Receiver<String>);

impl Output {
    /// Reads `output` to its end (so that the process never blocks on a full pipe), each line
    /// also written to `copy`.
    fn read(output: impl BufRead + Send + 'static, mut copy: Option<std::fs::File>) -> Self {
        let (lines, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in output.lines() {
                let Ok(line) = line else { break };
                if let Some(copy) = &mut copy {
                    let _ = writeln!(copy, "{line}");
                }
                // A receiver gone (the test no longer reads) still drains the pipe.
                let _ = lines.send(line);
            }
        });
        Self(receiver)
    }

    /// The next line, without its end, if one comes within [`LINE_TIMEOUT`].
    pub(crate) fn try_next_line(&self) -> Option<String> {
        self.0.recv_timeout(LINE_TIMEOUT).ok()
    }

    /// The next line, without its end; fails the test if none comes within [`LINE_TIMEOUT`]
    /// (or the process closed its output).
    #[allow(dead_code)]
    pub(crate) fn next_line(&self) -> String {
        self.0
            .recv_timeout(LINE_TIMEOUT)
            .unwrap_or_else(|err| panic!("no line from the process within {LINE_TIMEOUT:?}: {err}"))
    }
}

/// How long a command that runs to its end (`reset`, a shell line) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `command` to its end (on a blocking thread), failing the test after
/// [`COMMAND_TIMEOUT`]; its output, whatever its status.
pub(crate) async fn output_of(mut command: Command) -> std::process::Output {
    let output = tokio::task::spawn_blocking(move || command.output());
    tokio::time::timeout(COMMAND_TIMEOUT, output)
        .await
        .unwrap_or_else(|_| panic!("the command did not end within {COMMAND_TIMEOUT:?}"))
        .unwrap()
        .unwrap()
}

/// Runs `command` to its end as [`output_of`] does, failing the test unless it succeeds; its
/// standard output.
pub(crate) async fn stdout_of(command: Command) -> String {
    let shown = format!("{command:?}");
    let output = output_of(command).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{shown}: {}\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A free loopback port's address, for a listener the process binds itself (an admin address).
// Shared by test binaries, not all of which bind one.
#[allow(dead_code)]
pub(crate) fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}
