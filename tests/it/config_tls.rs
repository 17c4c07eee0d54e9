//! A store's `tls` table in a configuration file: its PEM files relative to the file's
//! directory, read when the store is built and again on a rebuild (a rotated certificate builds
//! the store again), and its mistakes named by field and file.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use testkit::TempDir;
use testkit::tls::{ClientAuth, ServerTls, TestCa};
use tower_redis_ratelimit::config::{Format, Limits, LimitsConfig};

use crate::support::RedisServer;

/// A file of a store at `url` with `tls`, written in `dir`.
fn write_file(dir: &Path, url: &str, tls: &str) -> std::path::PathBuf {
    let path = dir.join("limits.toml");
    std::fs::write(
        &path,
        format!("[stores.shared]\ntype = \"redis\"\nurl = \"{url}\"\ntls = {tls}\n"),
    )
    .unwrap();
    path
}

/// Copies `ca`'s CA, client certificate and key into `dir/certs` (`ca.pem`, `client.pem`,
/// `client.key`).
fn copy_certificates(ca: &TestCa, dir: &Path) {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    for (from, to) in [
        (ca.ca(), "ca.pem"),
        (ca.client_certificate(), "client.pem"),
        (ca.client_key(), "client.key"),
    ] {
        std::fs::copy(from, certs.join(to)).unwrap();
    }
}

const RELATIVE: &str = r#"{ ca = "certs/ca.pem", certificate = "certs/client.pem", private_key = "certs/client.key" }"#;

async fn answers(limits: &Limits) -> bool {
    let pings = tokio::time::timeout(Duration::from_secs(5), limits.ping_stores())
        .await
        .unwrap();
    pings.iter().all(|(_, answer)| answer.is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stores_tls_files_are_relative_to_the_files_directory() {
    let tls = ServerTls::new(Arc::new(TestCa::new()), ClientAuth::Required);
    let server = RedisServer::start_tls(&tls, &[]);
    let dir = TempDir::new("config-tls").unwrap();
    copy_certificates(tls.ca(), dir.path());
    // The tests run in the crate's directory, where `certs/` does not exist.
    let path = write_file(dir.path(), &server.url(), RELATIVE);
    let config = LimitsConfig::from_file(&path).unwrap();
    let store_tls = config.stores["shared"].tls.as_ref().unwrap();
    assert_eq!(
        store_tls.ca.as_deref(),
        Some(dir.path().join("certs/ca.pem").as_path())
    );
    let limits = config.build().unwrap();
    assert!(answers(&limits).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_reads_the_certificates_again_and_takes_rotated_ones() {
    let tls = ServerTls::new(Arc::new(TestCa::new()), ClientAuth::Required);
    let server = RedisServer::start_tls(&tls, &[]);
    let dir = TempDir::new("config-tls").unwrap();
    // First the files of another CA: the server is not trusted, the store does not answer.
    copy_certificates(&TestCa::new(), dir.path());
    let path = write_file(dir.path(), &server.url(), RELATIVE);
    let limits = LimitsConfig::from_file(&path).unwrap().build().unwrap();
    assert!(!answers(&limits).await);
    // The same file, its certificates replaced by the server's CA's: a rebuild reads them.
    copy_certificates(tls.ca(), dir.path());
    let config = LimitsConfig::from_file(&path).unwrap();
    let rebuilt = config.rebuild(&limits).unwrap();
    assert!(answers(&rebuilt).await);
    // Unchanged files keep the store and its connection: one connection of the store's, and
    // redis-cli's own, not a second store's.
    let kept = config.rebuild(&rebuilt).unwrap();
    assert!(answers(&kept).await);
    assert_eq!(server.info("clients", "connected_clients"), 2);
}

#[test]
fn mistakes_in_a_stores_tls_name_the_field_and_the_file() {
    let ca = TestCa::new();
    let dir = ca.dir().display().to_string();
    let error = |url: &str, tls: &str| {
        build_error(&format!(
            "[stores.shared]\ntype = \"redis\"\nurl = \"{url}\"\ntls = {tls}\n"
        ))
    };
    let tls_url = "rediss://127.0.0.1:6380";
    assert_eq!(
        error(
            tls_url,
            &format!(r#"{{ certificate = "{dir}/client.pem" }}"#)
        ),
        "`stores.shared.tls.private_key`: is required with `certificate`: a client certificate \
         is presented with its key"
    );
    assert_eq!(
        error(tls_url, &format!(r#"{{ ca = "{dir}/missing.pem" }}"#)),
        format!(
            "`stores.shared.tls.ca`: {dir}/missing.pem: cannot read it: No such file or \
             directory (os error 2)"
        )
    );
    assert_eq!(
        error(tls_url, &format!(r#"{{ ca = "{dir}/client.key" }}"#)),
        format!("`stores.shared.tls.ca`: {dir}/client.key: no PEM certificate in it")
    );
    assert_eq!(
        error(
            tls_url,
            &format!(r#"{{ certificate = "{dir}/client.pem", private_key = "{dir}/ca.pem" }}"#)
        ),
        format!(
            "`stores.shared.tls.private_key`: {dir}/ca.pem: no PEM private key in it: no items \
             found"
        )
    );
    assert_eq!(
        error(
            "redis://127.0.0.1:6379",
            &format!(r#"{{ ca = "{dir}/ca.pem" }}"#)
        ),
        "`stores.shared.tls`: TLS certificates are given for redis://127.0.0.1:6379, which is \
         not a TLS address: write rediss:// to connect with TLS"
    );
    // A region's ledger has a `tls` of its own.
    let ledger = build_error(&format!(
        "[stores.eu]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n\
         region = {{ name = \"eu\", ledger = {{ url = \"{tls_url}\", \
         tls = {{ ca = \"{dir}/missing.pem\" }} }} }}\n"
    ));
    assert_eq!(
        ledger,
        format!(
            "`stores.eu.region.ledger.tls.ca`: {dir}/missing.pem: cannot read it: No such file \
             or directory (os error 2)"
        )
    );
    let memory = build_error("[stores.local]\ntype = \"memory\"\ntls = {}\n");
    assert_eq!(
        memory,
        "`stores.local.tls`: is not a setting of a memory store: remove it"
    );
}

/// What building the limits of the TOML `text` refuses.
fn build_error(text: &str) -> String {
    match LimitsConfig::parse(text, Format::Toml).unwrap().build() {
        Ok(_) => panic!("built: {text}"),
        Err(err) => err.to_string(),
    }
}
