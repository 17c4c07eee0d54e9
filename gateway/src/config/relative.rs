//! One rule for every path a file names: relative to the file's own directory, never to the
//! directory the process was started in (which a service manager chooses, and a reload from
//! another shell would not share). Applied once, when the file is read, so that nothing after
//! it has to know where the file was.

use std::path::{Path, PathBuf};

use super::{ProxyConfig, ServeConfig, Tables, TlsConfig};

impl Tables {
    /// Every relative path of the tables made relative to `dir`, the file's directory.
    pub(super) fn resolve_paths(&mut self, dir: &Path) {
        if let Some(proxy) = &mut self.proxy {
            proxy.resolve_paths(dir);
        }
        if let Some(serve) = &mut self.serve {
            serve.resolve_paths(dir);
        }
    }
}

impl ProxyConfig {
    fn resolve_paths(&mut self, dir: &Path) {
        if let Some(ca) = &mut self.upstream_ca {
            resolve(ca, dir);
        }
        if let Some(tls) = &mut self.tls {
            tls.resolve_paths(dir);
        }
    }
}

impl ServeConfig {
    fn resolve_paths(&mut self, dir: &Path) {
        if let Some(socket) = &mut self.socket {
            resolve(socket, dir);
        }
        if let Some(tls) = &mut self.tls {
            tls.resolve_paths(dir);
        }
        if let Some(envoy) = &mut self.envoy {
            resolve(&mut envoy.files, dir);
        }
    }
}

impl TlsConfig {
    fn resolve_paths(&mut self, dir: &Path) {
        resolve(&mut self.certificate, dir);
        resolve(&mut self.private_key, dir);
    }
}

fn resolve(path: &mut PathBuf, dir: &Path) {
    if path.is_relative() {
        *path = dir.join(&*path);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{ServeConfig, Tables};

    #[test]
    fn relative_paths_are_the_files_directorys() {
        let mut tables: Tables = toml_tables(
            r#"
            [serve]
            socket = "run/serve.sock"
            tls = { certificate = "tls/cert.pem", private_key = "/etc/key.pem" }
            envoy = { files = "ratelimit" }
            "#,
        );
        tables.resolve_paths(Path::new("/etc/gateway"));
        let ServeConfig {
            socket, tls, envoy, ..
        } = tables.serve.unwrap();
        assert_eq!(socket.unwrap(), Path::new("/etc/gateway/run/serve.sock"));
        let tls = tls.unwrap();
        assert_eq!(tls.certificate, Path::new("/etc/gateway/tls/cert.pem"));
        assert_eq!(tls.private_key, Path::new("/etc/key.pem"));
        assert_eq!(envoy.unwrap().files, Path::new("/etc/gateway/ratelimit"));
    }

    fn toml_tables(text: &str) -> Tables {
        tower_redis_ratelimit::config::ConfigFile::<Tables>::parse(
            text,
            tower_redis_ratelimit::config::Format::Toml,
        )
        .unwrap()
        .tables
    }
}
