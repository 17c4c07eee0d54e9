//! TLS for private Redis servers: a [`TestCa`] made by the test (its certificate, a server
//! certificate for `127.0.0.1` and `localhost`, a client certificate, all in PEM files), and the
//! [`ServerTls`] a [`RedisServer`](crate::RedisServer), a cluster or a set of sentinels is
//! started with: TLS only (`--port 0 --tls-port`), verified by the test's CA.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use crate::TempDir;

/// A certificate authority of the test's own, and what it signed, as PEM files in a directory
/// of its own: `ca.pem`, `server.pem` and `server.key` (for `127.0.0.1` and `localhost`),
/// `client.pem` and `client.key`.
#[derive(Debug)]
pub struct TestCa {
    dir: TempDir,
}

impl TestCa {
    /// A fresh CA (each call another: one CA's certificates are unknown to another's).
    pub fn new() -> Self {
        let dir = TempDir::new("ca").expect("a directory for the test CA");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "tower-redis-ratelimit test CA");
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a CA key"))
            .expect("the CA certificate");
        let write = |name: &str, contents: String| {
            std::fs::write(dir.path().join(name), contents).expect("a PEM file of the test CA");
        };
        write("ca.pem", ca.pem());
        for (name, subject) in [("server", "127.0.0.1"), ("client", "client")] {
            let key = KeyPair::generate().expect("a key");
            let names = vec![subject.to_owned(), "localhost".to_owned()];
            let certificate = CertificateParams::new(names)
                .expect("certificate parameters")
                .signed_by(&key, &ca)
                .expect("a certificate signed by the test CA");
            write(&format!("{name}.pem"), certificate.pem());
            write(&format!("{name}.key"), key.serialize_pem());
        }
        Self { dir }
    }

    /// The CA's certificate.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// The servers' certificate (for `127.0.0.1` and `localhost`).
    pub fn server_certificate(&self) -> PathBuf {
        self.path("server.pem")
    }

    /// The servers' private key.
    pub fn server_key(&self) -> PathBuf {
        self.path("server.key")
    }

    /// The client certificate.
    pub fn client_certificate(&self) -> PathBuf {
        self.path("client.pem")
    }

    /// The client certificate's private key.
    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The contents of one of its files.
    pub fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a TLS server asks clients for a certificate (`--tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// `optional`: a client without a certificate is served; one with a certificate must have
    /// one of the test CA's.
    Optional,
    /// `yes`: a client without a certificate of the test CA is refused.
    Required,
}

/// How a server speaks TLS: the test CA's certificates and whether clients need one. Shared by
/// every server of a cluster or a sentinel set.
#[derive(Clone, Debug)]
pub struct ServerTls {
    ca: Arc<TestCa>,
    auth: ClientAuth,
}

impl ServerTls {
    /// TLS with `ca`'s certificates, clients authenticated as `auth` says.
    pub fn new(ca: Arc<TestCa>, auth: ClientAuth) -> Self {
        Self { ca, auth }
    }

    /// The CA the servers' certificates come from.
    pub fn ca(&self) -> &TestCa {
        &self.ca
    }

    /// `redis-server`'s arguments for TLS alone on `port` (no plain-text port), replication and
    /// the cluster bus over TLS too.
    pub(crate) fn server_args(&self, port: u16) -> Vec<String> {
        let auth = match self.auth {
            ClientAuth::Optional => "optional",
            ClientAuth::Required => "yes",
        };
        let mut args: Vec<String> = vec!["--port".into(), "0".into()];
        args.extend(["--tls-port".into(), port.to_string()]);
        args.extend(
            self.config_lines()
                .into_iter()
                .flat_map(|(name, value)| [format!("--{name}"), value]),
        );
        args.extend(["--tls-auth-clients".into(), auth.into()]);
        args
    }

    /// What a server's configuration file says for TLS on `port` (a sentinel's), plain text off.
    pub(crate) fn config_file(&self, port: u16) -> String {
        let auth = match self.auth {
            ClientAuth::Optional => "optional",
            ClientAuth::Required => "yes",
        };
        let mut text = format!("port 0\ntls-port {port}\ntls-auth-clients {auth}\n");
        for (name, value) in self.config_lines() {
            text.push_str(&format!("{name} \"{value}\"\n"));
        }
        text
    }

    /// `redis-cli`'s arguments to reach such a server, with the client certificate.
    pub(crate) fn cli_args(&self) -> Vec<String> {
        let path = |path: PathBuf| path.display().to_string();
        vec![
            "--tls".into(),
            "--cacert".into(),
            path(self.ca.ca()),
            "--cert".into(),
            path(self.ca.client_certificate()),
            "--key".into(),
            path(self.ca.client_key()),
        ]
    }

    fn config_lines(&self) -> Vec<(&'static str, String)> {
        let path = |path: PathBuf| path.display().to_string();
        vec![
            ("tls-cert-file", path(self.ca.server_certificate())),
            ("tls-key-file", path(self.ca.server_key())),
            // Replication and the cluster bus are clients too: they present the server's
            // certificate, which the CA signed.
            ("tls-client-cert-file", path(self.ca.server_certificate())),
            ("tls-client-key-file", path(self.ca.server_key())),
            ("tls-ca-cert-file", path(self.ca.ca())),
            ("tls-replication", "yes".to_owned()),
        ]
    }
}
