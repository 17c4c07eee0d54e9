//! gateway/docs/envoy.md's Envoy files load: `envoy --mode validate` accepts the file as the page shows
//! it, and with the page's Unix socket cluster in its place. (The live tests run them.)

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::TempDir;

use crate::front::{documented_envoy, on_unix_socket};

/// `envoy --mode validate -c FILE` of `file`: whether it succeeded, and what it printed.
fn validate(file: &str) -> (bool, String) {
    let envoy = testkit::peer::find("envoy").unwrap_or_else(|err| panic!("{err}"));
    let dir = TempDir::new("envoy-validate").unwrap();
    let path = dir.path().join("envoy.yaml");
    std::fs::write(&path, file).unwrap();
    let log = std::fs::File::create(dir.path().join("out.log")).unwrap();
    let mut child = Command::new(envoy)
        .args(["--mode", "validate", "--disable-hot-restart", "-c"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    // Validation takes a fraction of a second; a hung Envoy fails the test, not the suite.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("envoy --mode validate still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = std::fs::read_to_string(dir.path().join("out.log")).unwrap();
    (status.success(), output)
}

#[test]
fn the_pages_envoy_file_loads() {
    let (valid, output) = validate(&documented_envoy());
    assert!(valid, "{output}");
    assert!(output.contains("envoy.yaml' OK"), "{output}");
}

#[test]
fn the_pages_envoy_file_loads_with_its_unix_socket_cluster() {
    let file = on_unix_socket(
        &documented_envoy(),
        Path::new("/run/ratelimit-gateway/serve.sock"),
    );
    let (_, cluster) = file.split_once("\n  - name: ratelimit\n").unwrap();
    assert!(
        cluster.contains("type: STATIC") && cluster.contains("pipe:"),
        "{file}"
    );
    let (valid, output) = validate(&file);
    assert!(valid, "{output}");
}

/// The check above can fail: a file whose route names a cluster it does not define, as the
/// page's once did, is refused.
#[test]
fn a_file_without_the_backend_cluster_is_refused() {
    let file = documented_envoy();
    let (head, rest) = file.split_once("\n  - name: backend\n").unwrap();
    let (_, after) = rest.split_once("\n  - name: ratelimit\n").unwrap();
    let (valid, output) = validate(&format!("{head}\n  - name: ratelimit\n{after}"));
    assert!(!valid, "{output}");
    assert!(output.contains("unknown cluster 'backend'"), "{output}");
}
