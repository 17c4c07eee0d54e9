//! A store on a Redis that speaks TLS alone, requiring a client certificate of a CA the test
//! makes: docs/operations.md's "Managed Redis over TLS" file (its TOML block), limiting through
//! the proxy, shown by `check` as the page says, its mistakes named as the page says.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use testkit::TempDir;
use testkit::tls::{ClientAuth, ServerTls, TestCa};

use crate::support::{BINARY, Proxy, config_with, get_with, upstream};

/// The section of docs/operations.md about TLS to Redis.
fn section() -> String {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .unwrap();
    let start = page.find("## Managed Redis over TLS").unwrap();
    let rest = &page[start + 3..];
    rest[..rest.find("\n## ").unwrap()].to_owned()
}

/// The section's TOML block.
fn store_block() -> String {
    let section = section();
    let block = &section[section.find("```toml\n").unwrap() + 8..];
    block[..block.find("```").unwrap()].to_owned()
}

/// The section's TOML block, its URL `redis`'s.
fn store_at(redis: &testkit::RedisServer) -> String {
    let block = store_block();
    let store = block.replace(
        "app:${REDIS_PASSWORD}@redis.example.com:6380",
        &format!("127.0.0.1:{}", redis.port()),
    );
    assert_ne!(store, block, "the page's URL changed");
    store
}

/// The section's text after `before` up to `after`.
fn quoted(before: &str, after: &str) -> String {
    let section = section().replace('\n', " ");
    let rest = &section[section.find(before).unwrap() + before.len()..];
    rest[..rest.find(after).unwrap()].to_owned()
}

/// The test CA's files under the names the page's block gives them.
fn copy_certificates(ca: &TestCa, dir: &Path) {
    for (from, to) in [
        (ca.ca(), "redis-ca.pem"),
        (ca.client_certificate(), "redis-client.pem"),
        (ca.client_key(), "redis-client.key"),
    ] {
        std::fs::copy(from, dir.join(to)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_limits_in_a_redis_over_tls_as_the_page_shows() {
    let upstream = upstream().await;
    let tls = ServerTls::new(Arc::new(TestCa::new()), ClientAuth::Required);
    let redis = testkit::RedisServer::start_tls(&tls, &[]);
    let dir = TempDir::new("gateway-redis-tls").unwrap();
    copy_certificates(tls.ca(), dir.path());
    let store = store_at(&redis);
    // The certificates' paths are relative: from the file's directory, not the test's.
    let (proxy, _) = Proxy::start_in(
        dir.path(),
        &format!("{}\n{store}", config_with(upstream, 1, "")),
    );
    let key = [("x-api-key", "tls")];
    assert_eq!(get_with(&proxy.url("/api/echo"), &key).await.status(), 200);
    assert_eq!(get_with(&proxy.url("/api/echo"), &key).await.status(), 429);
    // Counted in the TLS server.
    assert_eq!(redis.keys().len(), 1, "{:?}", redis.keys());
}

#[test]
fn check_shows_the_stores_tls_and_names_a_bad_file_as_the_page_says() {
    let dir = TempDir::new("gateway-redis-tls").unwrap();
    copy_certificates(&TestCa::new(), dir.path());
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n{}",
            config_with("127.0.0.1:3000".parse().unwrap(), 1, ""),
            store_block()
        ),
    )
    .unwrap();
    let check = || {
        Command::new(BINARY)
            .arg("check")
            .arg(&config)
            .env("REDIS_PASSWORD", "s3cret")
            .output()
            .unwrap()
    };
    let in_dir = |text: String| text.replace("/etc/gateway", &dir.path().display().to_string());
    let output = check();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    let shown = in_dir(quoted("`ratelimit-gateway check` shows it as `", "`"));
    assert!(
        stdout.lines().any(|line| line.trim() == shown),
        "no line {shown:?} in:\n{stdout}"
    );
    // A key where the CA should be.
    std::fs::copy(
        dir.path().join("redis-client.key"),
        dir.path().join("redis-ca.pem"),
    )
    .unwrap();
    let output = check();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    let refused = in_dir(quoted("naming the field and the file: `` ", " ``"));
    assert!(stderr.contains(&refused), "no {refused:?} in:\n{stderr}");
}

/// A Redis CA rotated in the files, then SIGHUP: the store is built again with the new files
/// and answers (`/readyz`); before, with a CA that does not sign the server's certificate, it
/// did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reads_rotated_redis_certificates() {
    let upstream = upstream().await;
    let tls = ServerTls::new(Arc::new(TestCa::new()), ClientAuth::Required);
    let redis = testkit::RedisServer::start_tls(&tls, &[]);
    let dir = TempDir::new("gateway-redis-tls").unwrap();
    copy_certificates(&TestCa::new(), dir.path());
    let admin = crate::support::free_addr();
    let store = store_at(&redis);
    let config = format!(
        "{}\n{store}",
        config_with(upstream, 1, &format!("admin = \"{admin}\""))
    );
    let (proxy, _) = Proxy::start_in(dir.path(), &config);
    let readyz = || async {
        let response = crate::support::client()
            .get(format!("http://{admin}/readyz"))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let (status, text) = readyz().await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("invalid peer certificate"), "{text}");

    copy_certificates(tls.ca(), dir.path());
    proxy.signal("-HUP");
    proxy.message_containing("configuration reloaded");
    assert_eq!(readyz().await, (200, "ready\n".to_owned()));
    let key = [("x-api-key", "rotated")];
    assert_eq!(get_with(&proxy.url("/api/echo"), &key).await.status(), 200);
    assert_eq!(get_with(&proxy.url("/api/echo"), &key).await.status(), 429);
}
