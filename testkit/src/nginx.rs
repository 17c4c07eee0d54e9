//! A private `nginx`: one master process and its workers on a free loopback port, with its
//! configuration, logs and temporary files in a directory of its own, for the tests and
//! benchmarks that compare with nginx or put it in front of the gateway. A missing `nginx` fails
//! with how to install it.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{BoxError, TempDir, free_port};

/// An `nginx` master process, stopped (SIGTERM, then SIGKILL) and its directory removed when
/// dropped.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Nginx {
    /// Starts nginx with `workers` worker processes and `http`, the body of its `http { }`
    /// block, in which `{port}` is replaced by the free port it listens on (write
    /// `listen 127.0.0.1:{port};`); waits until it accepts connections. Client connections stay
    /// open for as many requests as the load generator sends (nginx closes one after 1,000 by
    /// default, which the load generator takes for a failure).
    pub fn start(workers: usize, http: &str) -> Result<Self, BoxError> {
        let binary = find_nginx()?;
        let dir = TempDir::new("nginx")
            .map_err(|err| format!("cannot create a directory for nginx: {err}"))?;
        let root = dir.path().display().to_string();
        let port = free_port();
        // As root, the workers would run as `nobody`, who cannot write to this directory.
        let user = if running_as_root() { "user root;" } else { "" };
        let config = format!(
            "{user}\n\
             daemon off;\n\
             worker_processes {workers};\n\
             pid {root}/nginx.pid;\n\
             error_log {root}/error.log warn;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\n\
               access_log off;\n\
               keepalive_requests 1000000;\n\
               client_body_temp_path {root}/body;\n\
               proxy_temp_path {root}/proxy;\n\
               fastcgi_temp_path {root}/fastcgi;\n\
               uwsgi_temp_path {root}/uwsgi;\n\
               scgi_temp_path {root}/scgi;\n\
               {}\n\
             }}\n",
            http.replace("{port}", &port.to_string())
        );
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config)?;
        let child = Command::new(&binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| format!("cannot run {}: {err}", binary.display()))?;
        let mut nginx = Nginx { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(nginx.addr()).is_err() {
            if let Some(status) = nginx.child.try_wait()? {
                let log =
                    std::fs::read_to_string(nginx.dir.path().join("error.log")).unwrap_or_default();
                let mut stderr = String::new();
                if let Some(mut pipe) = nginx.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                return Err(format!("nginx exited ({status}): {stderr}{log}").into());
            }
            if Instant::now() > deadline {
                return Err("nginx did not accept connections within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        crate::peer::stop(&mut self.child);
    }
}

/// The first ```` ```nginx ```` block of the markdown `page` (a guide's configuration), each
/// `from` of `replacements` replaced by its `to` (e.g. the guide's addresses by a test's). A
/// `from` the block lacks is an error: the guide changed, and so must its caller.
pub fn documented(page: &str, replacements: &[(&str, String)]) -> Result<String, BoxError> {
    crate::peer::documented_block(page, "nginx", "", replacements)
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// `nginx` on PATH, or where Debian puts it (`/usr/sbin`, often not on a user's PATH).
pub fn find_nginx() -> Result<PathBuf, BoxError> {
    crate::find_binary("nginx").or_else(|_| {
        let debian = PathBuf::from("/usr/sbin/nginx");
        if debian.is_file() {
            Ok(debian)
        } else {
            Err(
                "`nginx` was not found on PATH nor in /usr/sbin. The gateway's tests and \
                 benchmark start their own nginx: install it (Debian/Ubuntu: `sudo apt-get \
                 install nginx`; macOS: `brew install nginx`) and run again."
                    .into(),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper::client::conn::http1;
    use hyper_util::rt::TokioIo;

    use super::Nginx;

    /// The load generator keeps each connection for a whole slice: nginx must not close it
    /// after its default 1,000 requests.
    #[test]
    fn a_connection_serves_more_than_a_thousand_requests() {
        let nginx = Nginx::start(
            1,
            "server { listen 127.0.0.1:{port}; location / { return 200 \"ok\"; } }",
        )
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let stream = tokio::net::TcpStream::connect(nginx.addr()).await.unwrap();
            let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(connection);
            for sent in 0..1_100 {
                sender
                    .ready()
                    .await
                    .unwrap_or_else(|err| panic!("closed after {sent} requests: {err}"));
                let request = http::Request::get("/")
                    .header(http::header::HOST, "localhost")
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert_eq!(response.status(), 200);
                response.into_body().collect().await.unwrap();
            }
        });
    }
}
